#!/usr/bin/env bash
# record-progress.sh: record, under tmux, journalctl watch's progress display
# on a first list of a few thousand objects at a small page size, and
# journalctl stats reading the list's progress through the socket meanwhile.
#
#   scripts/record-progress.sh [OUT_DIR]     (N=3000 PAGE=5 by default)
#
# It starts the local control plane (internal/testing/cluster; binaries as for
# `make cluster`), creates N configmaps in namespace progress, runs
#   journalctl watch configmaps -n progress --page-size PAGE
# in a tmux pane (a terminal: the status line is drawn), and writes to
# OUT_DIR (default ./progress-recording):
#   pane.raw     everything the pane received, \r rewrites included
#   screens.txt  the pane's screen every 0.5 s while the list runs
#   stats.txt    journalctl stats --db taken while the list runs
set -euo pipefail

N=${N:-3000}
PAGE=${PAGE:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-progress-recording}" && cd "${1:-progress-recording}" && pwd)
work=$(mktemp -d)
session=wj-progress-$$
cluster=
cleanup() {
	tmux kill-session -t "$session" 2>/dev/null || true
	if [ -n "$cluster" ]; then kill "$cluster" 2>/dev/null || true; wait "$cluster" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

cd "$root"
go build -o "$work/journalctl" ./cmd/journalctl
go build -o "$work/cluster" ./internal/testing/cluster
"$work/cluster" -dir "$work/cp" >"$work/cluster.out" 2>&1 &
cluster=$!
for _ in $(seq 600); do
	grep -q "export KUBECONFIG" "$work/cluster.out" 2>/dev/null && break
	kill -0 "$cluster" 2>/dev/null || { cat "$work/cluster.out"; exit 1; }
	sleep 0.2
done
export KUBECONFIG=$work/cp/kubeconfig

kubectl create namespace progress >/dev/null
{
	echo "apiVersion: v1"
	echo "kind: List"
	echo "items:"
	for i in $(seq -w 1 "$N"); do
		printf -- '- {apiVersion: v1, kind: ConfigMap, metadata: {name: cm%s, namespace: progress}, data: {k: "value %s"}}\n' "$i" "$i"
	done
} >"$work/cms.yaml"
kubectl create -f "$work/cms.yaml" >/dev/null
echo "created $N configmaps; recording to $out"

: >"$out/pane.raw"
: >"$out/screens.txt"
tmux new-session -d -s "$session" -x 110 -y 12
tmux pipe-pane -t "$session" -o "cat >>'$out/pane.raw'"
tmux send-keys -t "$session" "$work/journalctl watch configmaps -n progress --db $work/cm.db --page-size $PAGE" Enter

stats_taken=
for _ in $(seq 1200); do
	{ echo "--- $(date -u +%T.%N | cut -c1-12)"; tmux capture-pane -t "$session" -p; } >>"$out/screens.txt"
	if [ -z "$stats_taken" ] && grep -q "listing:" "$out/pane.raw"; then
		"$work/journalctl" stats --db "$work/cm.db" >"$out/stats.txt" 2>&1 || true
		stats_taken=1
	fi
	grep -q "list complete" "$out/pane.raw" && break
	sleep 0.5
done
tmux send-keys -t "$session" C-c
sleep 1
tmux capture-pane -t "$session" -p >>"$out/screens.txt"
echo "done: $out/pane.raw, $out/screens.txt, $out/stats.txt"
