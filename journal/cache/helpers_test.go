package cache_test

import (
	stdjson "encoding/json"
	"strings"
)

func marshal(v any) ([]byte, error) { return stdjson.Marshal(v) }

func cutKey(k string) (ns, name string, ok bool) {
	ns, name, ok = strings.Cut(k, "/")
	if !ok {
		return "", k, false
	}
	return ns, name, true
}
