package main

// What the run writes: the raw results (JSON), the plot (SVG) and the
// marked section of the results file.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// The section's markers, one section per kind.
func sectionBegin(kind string) string {
	return "<!-- headline " + kind + ": begin (bench/cmd/headline writes this section; make headline) -->"
}
func sectionEnd(kind string) string { return "<!-- headline " + kind + ": end -->" }

// anyEnd matches any kind's end marker.
var anyEnd = regexp.MustCompile(`<!-- headline [a-z]+: end -->`)

// objects names n objects of the kind for a reader.
func objects(kind string, n int) string {
	if kind == kindSecrets {
		return thousands(n) + " Secrets"
	}
	return thousands(n) + " ConfigMaps"
}

const (
	// handWritten is benchharness's marker: it keeps what follows, so the
	// section goes right after it.
	handWritten = "<!-- Everything below this line is written by hand; benchharness keeps it. -->"
)

func write(o options, res *results) error {
	if o.json != "" {
		b, err := json.MarshalIndent(res, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.json, b, 0o644); err != nil {
			return err
		}
	}
	if o.svg != "" {
		if err := os.MkdirAll(filepath.Dir(o.svg), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(o.svg, plot(res), 0o644); err != nil {
			return err
		}
	}
	if o.out != "" {
		old, err := os.ReadFile(o.out)
		if err != nil {
			return err
		}
		begin, end := sectionBegin(res.Kind), sectionEnd(res.Kind)
		sec := []byte(begin + "\n" + section(o, res) + end)
		var next []byte
		if i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end)); i >= 0 && j > i {
			next = append(append(append([]byte{}, old[:i]...), sec...), old[j+len(end):]...)
		} else if m := anyEnd.FindAllIndex(old, -1); len(m) > 0 {
			k := m[len(m)-1][1] // after the other kinds' sections
			next = append(append(append([]byte{}, old[:k]...), append([]byte("\n\n"), sec...)...), old[k:]...)
		} else if i := bytes.Index(old, []byte(handWritten)); i >= 0 {
			k := i + len(handWritten)
			next = append(append(append([]byte{}, old[:k]...), append([]byte("\n\n"), sec...)...), old[k:]...)
		} else {
			next = append(append(old, '\n'), sec...)
		}
		if err := os.WriteFile(o.out, next, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// label names a case for a reader.
func label(c string) string {
	switch c {
	case caseCR:
		return "controller-runtime's cache"
	case caseCRNoLimit:
		return "controller-runtime's cache, no limit"
	case caseDropIn:
		return "jcache drop-in, first start"
	case caseDropInRe:
		return "jcache drop-in, restart"
	case caseDropInNoL:
		return "jcache drop-in, first start, no limit"
	case caseExact:
		return "jcache.Exact, first start"
	case caseExactRe:
		return "jcache.Exact, restart"
	}
	return c
}

func secs(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f s", v)
}

func section(o options, res *results) string {
	var b strings.Builder
	kind, sealed := "ConfigMaps", ""
	if res.Kind == kindSecrets {
		kind, sealed = "Secrets", " (jcache keeps them sealed, with a key file as a mounted Secret gives it)"
	}
	fmt.Fprintf(&b, "\n## The headline: %s in a %s operator\n\n", objects(res.Kind, res.N), mib(res.Limit))
	if o.svg != "" {
		fmt.Fprintf(&b, "![RSS over time](%s)\n\n", o.svgLink)
	}
	fmt.Fprintf(&b, "One operator process (controller-runtime's builder, For %s, a reconciler that Gets the object through `mgr.GetClient()`), only its cache changed, over %s of %s of data in %d namespaces%s, each run in a memory limit of %s with `GOMEMLIMIT` at 90%% of it, as a pod runs. Reproduce: `%s`. Run %s on %s; the objects took %.0f s to create.\n\n",
		kind, objects(res.Kind, res.N), size(res.Size), namespaces, sealed, mib(res.Limit), res.Command, res.Date.Format("2006-01-02"), res.Machine, res.Populated)
	b.WriteString("| case | limit | killed | peak RSS | peak anon | first reconcile | every object reconciled | ready (Exact) | reconciles | disk |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Cases {
		killed := "no"
		if r.Killed {
			killed = fmt.Sprintf("**yes, at %.1f s** (OOM kills: %d)", r.KilledAt, r.OOMKills)
		}
		if r.Err != "" {
			killed = "error: " + r.Err
		}
		all := secs(r.All)
		if r.All == 0 && r.Distinct > 0 {
			all = fmt.Sprintf("– (%s of %s)", thousands(int(r.Distinct)), thousands(res.N))
		}
		ready := secs(r.Ready)
		if r.Idle > 0 {
			ready += fmt.Sprintf(" (nothing left at %.1f s)", r.Idle)
		}
		disk := "–"
		if r.Disk > 0 {
			disk = mib(r.Disk)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label(r.Case), mib(r.Limit), killed,
			mib(r.PeakRSS), mib(r.PeakAnon), secs(r.First), all, ready, thousands(int(r.Reconciles)), disk)
	}
	b.WriteString("\n- Times are from the moment the process, already in its cgroup, was let go. **ready (Exact)**: the source's `WaitForSync` returned, so controller-runtime started the workers; for a restart, also when every event in the file had been committed (nothing left to reconcile).\n")
	b.WriteString("- **peak RSS**: the largest VmRSS sampled every 100 ms (bbolt's memory map included, which the kernel can reclaim under the limit); **peak anon**: the largest RssAnon, the memory the OOM killer weighs.\n")
	b.WriteString("- **reconciles**: the reconciler's calls during the run; a restart with nothing changed that reconciles 0 is Exact's promise.\n\n")
	return b.String()
}

func size(b int) string {
	if b >= 1<<10 && b%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d bytes", b)
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func machine() string {
	kernel, _ := exec.Command("uname", "-r").Output()
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	return fmt.Sprintf("%d cores, Linux %s, %s, commit %s", runtime.NumCPU(), strings.TrimSpace(string(kernel)), runtime.Version(), strings.TrimSpace(string(commit)))
}

// plot draws RSS over time, first starts on the left and restarts on the
// right, the limit as a dashed line, a cross where the kernel killed.
func plot(res *results) []byte {
	const w, pad, gap, ph = 1000, 60, 40, 260
	pw := (w - 2*pad - gap) / 2
	colors := map[string]string{caseCR: "#d62728", caseDropIn: "#1f77b4", caseDropInRe: "#1f77b4", caseExact: "#2ca02c", caseExactRe: "#2ca02c"}
	panels := [2][]*result{}
	for _, r := range res.Cases {
		if r.Limit == 0 { // the peaks without a limit are in the table
			continue
		}
		i := 0
		if strings.HasSuffix(r.Case, "-restart") {
			i = 1
		}
		panels[i] = append(panels[i], r)
	}
	legend := max(len(panels[0]), len(panels[1]))
	h := pad + ph + 30 + 16*legend + 10 // the legends below the axes
	ymax := float64(res.Limit) * 1.25
	for _, r := range res.Cases {
		if r.Limit > 0 {
			ymax = max(ymax, float64(r.PeakRSS)*1.05)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">RSS of one operator over %s, limit %s (GOMEMLIMIT 90%%)</text>`+"\n", pad, objects(res.Kind, res.N), mib(res.Limit))
	for pi, rs := range panels {
		x0 := pad + pi*(pw+gap)
		xmax := 10.0
		for _, r := range rs {
			if len(r.Samples) > 0 {
				xmax = max(xmax, r.Samples[len(r.Samples)-1].T)
			}
		}
		xmax *= 1.05
		X := func(t float64) float64 { return float64(x0) + t/xmax*float64(pw) }
		Y := func(v float64) float64 { return float64(pad+ph) - v/ymax*float64(ph) }
		title := "first start"
		if pi == 1 {
			title = "restart on the same files, nothing changed"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, pad-12, title)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, pad, pw, ph)
		for _, v := range ticks(ymax / (1 << 20)) {
			y := Y(v * (1 << 20))
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%g MiB</text>`+"\n", x0, x0+pw, y, y, x0-4, y+4, v)
		}
		for _, t := range ticks(xmax) {
			x := X(t)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%g s</text>`+"\n", x, pad+ph+16, t)
		}
		if res.Limit > 0 {
			y := Y(float64(res.Limit))
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="black" stroke-dasharray="6,4"/><text x="%d" y="%.1f" text-anchor="end">limit %s</text>`+"\n", x0, x0+pw, y, y, x0+pw-4, y-4, mib(res.Limit))
		}
		for li, r := range rs {
			if len(r.Samples) == 0 {
				continue
			}
			var pts []string
			for _, s := range r.Samples {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", X(s.T), Y(min(float64(s.RSS), ymax))))
			}
			col := colors[r.Case]
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", col, strings.Join(pts, " "))
			last := r.Samples[len(r.Samples)-1]
			if r.Killed {
				x, y := X(last.T), Y(min(float64(last.RSS), ymax))
				fmt.Fprintf(&b, `<path d="M%.1f %.1fl8 8m0 -8l-8 8" stroke="%s" stroke-width="3"/>`+"\n", x-4, y-4, col)
			}
			note := label(r.Case)
			switch {
			case r.Killed:
				note += fmt.Sprintf(": OOM-killed at %.0f s", r.KilledAt)
			case r.All > 0:
				note += fmt.Sprintf(": all reconciled at %.0f s, peak %s", r.All, mib(r.PeakRSS))
			case r.Idle > 0:
				note += fmt.Sprintf(": ready at %.1f s, %d reconciles, peak %s", r.Ready, r.Reconciles, mib(r.PeakRSS))
			}
			ly := pad + ph + 36 + li*16
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%d" y="%d">%s</text>`+"\n",
				x0, x0+20, ly, ly, col, x0+24, ly+4, html.EscapeString(note))
		}
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// ticks returns round values from 0 to about max, 4 to 8 of them.
func ticks(m float64) []float64 {
	step := 1.0
	for m/step > 8 {
		switch {
		case m/(step*2) <= 8:
			step *= 2
		case m/(step*5) <= 8:
			step *= 5
		default:
			step *= 10
		}
	}
	var out []float64
	for v := 0.0; v <= m; v += step {
		out = append(out, v)
	}
	return out
}
