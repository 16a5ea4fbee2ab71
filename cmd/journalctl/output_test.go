package main

import (
	"strings"
	"testing"
	"time"

	"github.com/watchjournal/watchjournal/journal"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"67108864", 64 << 20},
		{"64Mi", 64 << 20},
		{"1Gi", 1 << 30},
		{"1.5Gi", 3 << 29},
		{"500M", 500_000_000},
		{"1e3", 1000},
		{"0", 0},
	} {
		if got, err := parseSize("retain-bytes", tc.in); got != tc.want || err != nil {
			t.Errorf("parseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"lots", `--retain-bytes "lots": want bytes or a quantity like 64Mi or 1Gi`},
		{"64MB", `--retain-bytes "64MB": want bytes or a quantity`},
		{"-1", `--retain-bytes "-1": want a whole, non-negative number of bytes`},
		{"100m", `--retain-bytes "100m": want a whole, non-negative number of bytes`},
		{"0.5", `--retain-bytes "0.5": want a whole`},
		{"20E", `--retain-bytes "20E": want a whole`},
	} {
		if got, err := parseSize("retain-bytes", tc.in); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("parseSize(%q) = %d, %v; want error %q", tc.in, got, err, tc.want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		in   uint64
		want string
	}{
		{64 << 20, "64Mi"},
		{1 << 30, "1Gi"},
		{1536, "1536"},
		{3 << 9, "1536"},
		{3 << 19, "1536Ki"},
		{1000, "1000"},
		{500_000_000, "500000000"},
		{1 << 63, "9223372036854775808"},
	} {
		got := formatSize(tc.in)
		if got != tc.want {
			t.Errorf("formatSize(%d) = %q; want %q", tc.in, got, tc.want)
		}
		if back, err := parseSize("x", got); tc.in <= 1<<62 && (back != tc.in || err != nil) {
			t.Errorf("parseSize(formatSize(%d)) = %d, %v; want it back", tc.in, back, err)
		}
	}
}

func TestFormatRetention(t *testing.T) {
	for _, tc := range []struct {
		r    journal.Retention
		want string
	}{
		{journal.Retention{}, "none"},
		{journal.Retention{MaxEvents: 10000, MaxBytes: 64 << 20, MaxAge: 24 * time.Hour, HardMaxBytes: 1 << 30},
			"events 10000, bytes 64Mi, age 24h0m0s, hard bytes 1Gi"},
		{journal.Retention{MaxAge: 90 * time.Minute}, "age 1h30m0s"},
	} {
		if got := formatRetention(tc.r); got != tc.want {
			t.Errorf("formatRetention(%+v) = %q; want %q", tc.r, got, tc.want)
		}
	}
}
