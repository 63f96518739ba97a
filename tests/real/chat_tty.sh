#!/usr/bin/env bash
# `zerolayer chat` in a pseudo-terminal (tmux): the prompt, a streamed answer,
# Ctrl-C stopping a long answer but not the program, /system, /save writing
# the conversation as JSON, and Ctrl-D ending the program.
set -u
ZL="$1"; ROOT="$2"
command -v tmux >/dev/null || { echo "SKIPPED: tmux is not installed"; exit 77; }
M="$ZL_MODELS/$(awk -F'\t' '$1 == "smollm2-135m" { print $2 }' "$ROOT/tools/models.tsv")"
tmp=$(mktemp -d); S="zlchat$$"
trap 'tmux kill-session -t "$S" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
screen() { tmux capture-pane -p -t "$S" -S -200; }
wait_for() { # regex, seconds
  local i; for i in $(seq 1 $(( $2 * 10 ))); do screen | grep -qE "$1" && return 0; sleep 0.1; done; return 1; }
tmux new-session -d -s "$S" -x 200 -y 50 "trap '' INT; \"$ZL\" chat -m \"$M\" --temp 0 -t 2 -n 400 -s 'You are a helpful assistant.'; echo EXITED \$?; sleep 30"
check "prompt shown" 'wait_for "^>" 30'
tmux send-keys -t "$S" "What is the capital of France?" Enter
check "streamed answer" 'wait_for "Paris" 30'
check "prompt again" 'wait_for "tok/s\)" 30'
tmux send-keys -t "$S" "Write a very long story about a dragon, in many chapters." Enter
sleep 2
tmux send-keys -t "$S" C-c
check "Ctrl-C stops the answer" 'wait_for "\[stopped\]" 10'
check "the program is still there" '! screen | grep -q EXITED'
tmux send-keys -t "$S" "/system You are a pirate." Enter
check "/system resets" 'wait_for "system prompt set" 10'
# the answer is done when one more "tok/s)" line is on the screen (earlier answers have theirs)
answers() { tmux capture-pane -p -t "$S" -S - | grep -c "tok/s)"; }
before=$(answers)
tmux send-keys -t "$S" "Say hello." Enter
for _ in $(seq 1 1200); do [ "$(answers)" -gt "$before" ] && break; sleep 0.1; done
tmux send-keys -t "$S" "/save $tmp/conv.json" Enter
check "/save" 'wait_for "saved [0-9]+ messages" 10'
check "saved JSON: system, user, assistant" 'python3 -c "import json,sys; m=json.load(open(sys.argv[1])); assert [x[\"role\"] for x in m]==[\"system\",\"user\",\"assistant\"], m; assert m[0][\"content\"]==\"You are a pirate.\"" "$tmp/conv.json"'
tmux send-keys -t "$S" C-d
check "Ctrl-D exits 0" 'wait_for "EXITED 0" 10'
[ $fail -eq 0 ] && echo "chat_tty: all passed" || { screen | tail -40; exit 1; }
