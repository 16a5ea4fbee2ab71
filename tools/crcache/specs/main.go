// Command specs prints a ginkgo JSON report as specs.sh does with jq, for
// machines without jq: one "Describe > Context > ... > It<TAB>state" line per
// It spec, sorted bytewise (LC_ALL=C sort). Stdlib only.
//
//	go run ./specs report.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: specs report.json")
		os.Exit(2)
	}
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "specs:", err)
		os.Exit(2)
	}
	var suites []struct {
		SpecReports []struct {
			ContainerHierarchyTexts []string
			LeafNodeText            string
			LeafNodeType            string
			State                   string
		}
	}
	if err := json.Unmarshal(b, &suites); err != nil || len(suites) == 0 {
		fmt.Fprintln(os.Stderr, "specs: not a ginkgo JSON report:", err)
		os.Exit(2)
	}
	var lines []string
	for _, s := range suites[0].SpecReports {
		if s.LeafNodeType == "It" {
			lines = append(lines, strings.Join(append(s.ContainerHierarchyTexts, s.LeafNodeText), " > ")+"\t"+s.State)
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}
