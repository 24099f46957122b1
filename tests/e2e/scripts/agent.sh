#!/bin/sh
# A scripted agent (issue 12's evidence): works through the tasks given as
# arguments, in order, using only the squadctl commands the squad-protocol
# skill shows (next, task show, progress, lock acquire/release, send,
# inbox next). It reads every message it gets and answers questions.
#
# Environment: SQUAD_AGENT (who it is), SQUADCTL (the binary), LOG (a file:
# one line per message read or answered), SLOW (seconds spent on the first
# task, to outlast its timeout; optional), ASK (an agent to ask a question
# during the first task and wait for the answer; optional).
set -eu
ctl() { "$SQUADCTL" "$@"; }
note() { echo "$SQUAD_AGENT $*" >> "$LOG"; }

# Reads every unread message, most urgent first; answers questions.
read_inbox() {
  while out=$(ctl inbox next "$SQUAD_AGENT" --json 2>/dev/null); do
    id=$(printf '%s\n' "$out" | sed -n 's/^ *"message_id": "\(msg_[A-Za-z0-9_]*\)".*/\1/p' | head -n 1)
    from=$(printf '%s\n' "$out" | grep -o 'from_agent: [a-z0-9-]*' | head -n 1 | cut -d' ' -f2)
    subject=$(printf '%s\n' "$out" | grep -o 'subject: [^\\"]*' | head -n 1 | cut -c10-)
    note "read $id from $from: $subject"
    if printf '%s\n' "$out" | grep -q 'type: question'; then
      ctl send --from "$SQUAD_AGENT" --to "$from" --priority high --type notification \
        --subject "Answer" --message "ISO 8601" --task "$SQUAD_TASK" --in-reply-to "$id" >/dev/null
      note "answered $id"
    fi
  done
}

# Waits (reading messages meanwhile) until the task is ready and squadd said so.
wait_ready() {
  n=0
  until ctl task show "$1" --json | grep -q '"ready": true' &&
    grep -q "^$SQUAD_AGENT read .* from squadd: Task $1 is ready\$" "$LOG"; do
    read_inbox
    n=$((n + 1))
    if [ "$n" -gt 60 ]; then echo "$SQUAD_AGENT: $1 never became ready" >&2; exit 1; fi
    ctl next --agent "$SQUAD_AGENT" --wait 1s >/dev/null || true
    sleep 0.1
  done
}

first=yes
for task in "$@"; do
  SQUAD_TASK=$task
  export SQUAD_TASK
  wait_ready "$task"
  ctl progress --task "$task" --status in_progress --action "starting" --todo "the work" >/dev/null
  ctl lock acquire --agent "$SQUAD_AGENT" --task "$task" "src/$SQUAD_AGENT/**" >/dev/null
  if [ "$first" = yes ] && [ -n "${SLOW:-}" ]; then sleep "$SLOW"; fi
  ctl progress --task "$task" --done "the work" --artifact "src/$SQUAD_AGENT/$task.rs" \
    --percent 60 --check unit=passing >/dev/null
  if [ "$first" = yes ] && [ -n "${ASK:-}" ]; then
    ctl send --from "$SQUAD_AGENT" --to "$ASK" --priority high --type question \
      --subject "Date format?" --message "ISO 8601 or epoch seconds?" --task "$task" >/dev/null
    n=0
    until grep -q "^$SQUAD_AGENT read .* from $ASK: " "$LOG"; do
      read_inbox
      n=$((n + 1))
      if [ "$n" -gt 300 ]; then echo "$SQUAD_AGENT: no answer from $ASK" >&2; exit 1; fi
      sleep 0.1
    done
  fi
  ctl progress --task "$task" --status completed --done "the work" --action "done" >/dev/null
  ctl lock release --agent "$SQUAD_AGENT" --all >/dev/null
  first=no
done
read_inbox
note "finished"
