#!/bin/bash
# Long CPU measurements that outlive a session: each run writes to a live store in
# scratch/ (not tracked), and `snapshot` copies every live store, consistent even while its run
# writes, into benchmarks/runs/stores/ (tracked), so a fresh clone resumes each run where the
# last committed snapshot left it: finished strings are read back, unfinished ones go on from
# their saved optimiser state (kept every minute).
#
#   bash benchmarks/runs/runs.sh start NAME...   start runs in the background (one thread each;
#                                                A,B: B starts when A ends, on the same core)
#   bash benchmarks/runs/runs.sh snapshot        back up every live store (then commit them)
#   bash benchmarks/runs/runs.sh status          finished strings per run, and what is running (the
#                                                plan's focus lines: decided, running or waiting; the
#                                                *-9k runs: also how many crammed with patience 500,
#                                                the longest stalls of the crammed strings,
#                                                and n50 at 1000 / 500, 3000 / 500 and (the 27k
#                                                runs, on the same store) 9000 / 1500 read from
#                                                the run so far: accesslib store ladder; a
#                                                running run: its pace since the snapshot before
#                                                its last one (kept in LIVE/.before-NAME.sqlite), or
#                                                since it started if later (from the store as it
#                                                found it, kept in LIVE/.start-NAME.sqlite: a fresh
#                                                clone's is the committed snapshot), and when its
#                                                open strings reach its step budget at that pace,
#                                                and where they end by their patience if none
#                                                gains again: accesslib store pace --running-since)
#   bash benchmarks/runs/runs.sh stop            SIGTERM every run (each loses at most the last
#                                                minute: unfinished strings are kept every minute)
#   bash benchmarks/runs/runs.sh focus NAME M STEPS/PATIENCE
#                                                stop every run, then run NAME's m = M strings alone
#                                                on every core (RUNS_THREADS), each only until its
#                                                outcome within STEPS/PATIENCE is known (make_bundles.py
#                                                --hold-at: the ones that budget fails are set aside,
#                                                kept in the store); then `resume`: a smaller budget
#                                                decided hours sooner (e.g. [A]'s 3000 / 500 at m = 3
#                                                of a run going to 9000 / 1500 at m = 2 and 3); the
#                                                ladder it reads in LIVE/NAME-focus-ladder.log
#   bash benchmarks/runs/runs.sh alone NAME      stop every run, then run NAME whole (every m, its own
#                                                budget, then its ladder) alone on every core
#                                                (RUNS_THREADS), mark it finished and resume the plan:
#                                                a run near its end decided hours sooner (e.g. the last
#                                                open strings of smol-tokens-9k-m3: about 2 s a step
#                                                on two threads against 4 to 6 beside another run)
#   bash benchmarks/runs/runs.sh ship NAME       a run finished here (under [A]'s protocol: a SmolLM2 run,
#                                                gemma-9k or gemma-27k) into its model's shipped bundle, nothing
#                                                crammed: its bundle copied to
#                                                benchmarks/runs/bundles/FOLDER/ (the run's store's name for
#                                                an *-m2 or *-m3 run, else NAME) and kept (make_bundles.py
#                                                --add-remeasure), its budget map re-read from its store's
#                                                snapshot, taken then (--add-budget-map: the command it
#                                                records names a file a clone has), and for a *-9k-m2,
#                                                *-9k-m3 or gemma-9k run [A]'s 3000 / 500 at every m read
#                                                from its strings into
#                                                benchmarks/runs/bundles/*-3k/ and kept too (--read-budget);
#                                                the tables are rewritten (see docs/real-models.md)
#   bash benchmarks/runs/runs.sh resume          first the plan's first focus line (focus NAME M
#                                                STEPS/PATIENCE) whose budget is not decided yet, if
#                                                any (the chains follow when it ends); then its
#                                                first alone line (alone NAME) whose run has not
#                                                finished here and not failed alone (runs.sh alone
#                                                NAME, which resumes the plan when it ends); else
#                                                start the chains of benchmarks/runs/plan that are
#                                                not running, less the runs they have finished here
#                                                (a fresh clone has finished none: those read their
#                                                strings back from the snapshot, quickly); where a
#                                                run of a chain is going in another chain, the rest
#                                                of it waits for that chain (@NAME)
#
# Runs (the commands are in docs/real-models.md and docs/gemma.md):
#   gemma-n50     Gemma-3-270M, m = 1, [A]'s protocol and layout, glove100k, n = 6, 9, 12, 18, 24, 32 x 6
#   smol-tokens   SmolLM2-135M, m = 1, random tokens after BOS, fast protocol, 4500 steps,
#                 patience 900, n = 10, 13, 16, 20, 24, 28 x 6
#   smol-paper-tokens   SmolLM2-135M, m = 1, random tokens after BOS, [A]'s protocol with 9000 steps
#                 (patience 500): its 1000- and 3000-step rungs are read from the same strings,
#                 n = 6, 9, 12, 17, 22, 27, 32 x 6 (6 and 9 added once 12 crammed only 2 of 6)
#   smol-glove-9k SmolLM2-135M, m = 1, glove100k words after BOS, [A]'s protocol with 3x its steps
#                 and 3x its patience (9000 / 1500): [A]'s own 3000 / 500 (and 1000 / 500) are read
#                 from the same strings (when each string's best accuracy rose), so one run is the
#                 budget check, n = 10, 16, 24, 34, 46 x 6
#   smol-tokens-9k  the same with random tokens after BOS, n = 6, 9, 12, 17, 22, 27, 32 x 6
#   gemma-9k      gemma-n50 with 3x [A]'s steps and patience (9000 / 1500): its 1000 / 500 and
#                 3000 / 500 are read from the same strings, so it checks gemma-n50's budget
#   smol-glove-9k-m2, smol-tokens-9k-m2   m = 1 and 2 in the store of the m = 1 run (its strings are
#                 read back, m = 2 is crammed): one bundle with both curves and their slope, the
#                 m = 2 rungs read as the m = 1 ones are; each waits for its m = 1 run, so chain
#                 them after it (start smol-glove-9k,smol-glove-9k-m2 ...); m = 2 at n = 24, 34, 46,
#                 62, 82 (words) and 12, 17, 24, 32, 42, 54 (tokens) x 6: up to twice the m = 1 grid's
#                 reach, since at 9000 / 1500 m = 1 reached n50 30.7 (words) and 15 to 32 (tokens,
#                 still open); the shortest (24 and 12, added at step ~1100 of the words run, when
#                 1000 / 500 had crammed only 3 of 6 at 34) keep n50 inside the grid at 1000 / 500
#   smol-glove-9k-m3, smol-tokens-9k-m3   the *-9k-m2 run with m = 3 added, on the same store: the
#                 m = 1 strings are read back, the m = 2 ones go on from their kept states, and m = 3
#                 at n = 34, 46, 62, 82, 108 (words) and 17, 24, 32, 42, 54, 70 (tokens) x 6 (the m = 2
#                 grid one step up, one step more) joins them; one bundle with all three curves, and
#                 [A]'s 3000 / 500 at every m read from it (make_bundles.py --read-budget) once decided
#   smol-glove-27k, smol-tokens-27k   the *-9k-m2 runs with 3x their steps and patience (27000 /
#                 4500), on the same store: each string the 9000 / 1500 run finished goes on from
#                 where it left it (--extend-from 9000/1500; strings finished before 5 December
#                 15:10 UTC kept no state and are crammed from the start); 9000 / 1500 and [A]'s
#                 3000 / 500 are read from the same strings, so it is the 9000 / 1500 run's budget
#                 check at m = 1 and 2
#   gemma-27k     gemma-9k with 3x its steps and patience (27000 / 4500), on its store: every string
#                 gone on from the state gemma-9k finished it in (all 36 kept one; the 22 crammed are
#                 taken as they are), so it pays only for the 14 that 9000 / 1500 did not cram: the
#                 9000 / 1500 run's budget check (9000 / 1500, 3000 / 500, 1000 / 500 read from it)
# A run under [A]'s protocol that ends well is followed by its budget ladder (1000 and, for
# SmolLM2, 3000 steps), read from its own strings: its bundle in scratch/runs/NAME-bundle/ has it.
set -euo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"   # this file, wherever it was called from
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
PY=${PY:-.venv/bin/python}
LIVE=${RUNS_LIVE:-scratch/runs}              # the live stores, logs and bundles (not tracked)
KEPT=${RUNS_KEPT:-benchmarks/runs/stores}    # their snapshots (tracked)
PLAN=${RUNS_PLAN:-benchmarks/runs/plan}      # the chains `resume` starts (tracked)
BUNDLES=${RUNS_BUNDLES:-benchmarks/runs/bundles}   # finished runs' bundles, kept in the shipped ones (tracked)
RUNS="gemma-n50 smol-tokens smol-paper-tokens smol-glove-9k smol-tokens-9k smol-glove-9k-m2 smol-tokens-9k-m2 gemma-9k"
RUNS="$RUNS smol-glove-27k smol-tokens-27k smol-glove-9k-m3 smol-tokens-9k-m3 gemma-27k"

args() {   # the make_bundles.py arguments of each run
  case "$1" in
    gemma-n50) echo "--models gemma-3-270m --m 1 --samples 6 --source glove100k --add-special-tokens
      --protocol paper --search grid --lengths 1:6,9,12,18,24,32 --no-geometry";;
    smol-tokens) echo "--models smollm2-135m --m 1 --samples 6 --source tokens --bos --protocol fast
      --max-steps 4500 --patience 900 --search grid --lengths 1:10,13,16,20,24,28 --no-geometry";;
    smol-paper-tokens) echo "--models smollm2-135m --m 1 --samples 6 --source tokens --bos --protocol paper
      --max-steps 9000 --patience 500 --search grid --lengths 1:6,9,12,17,22,27,32 --no-geometry";;
    smol-glove-9k) echo "--models smollm2-135m --m 1 --samples 6 --source glove100k --bos --protocol paper
      --max-steps 9000 --patience 1500 --search grid --lengths 1:10,16,24,34,46 --no-geometry";;
    smol-tokens-9k) echo "--models smollm2-135m --m 1 --samples 6 --source tokens --bos --protocol paper
      --max-steps 9000 --patience 1500 --search grid --lengths 1:6,9,12,17,22,27,32 --no-geometry";;
    gemma-9k) echo "--models gemma-3-270m --m 1 --samples 6 --source glove100k --add-special-tokens
      --protocol paper --max-steps 9000 --patience 1500 --search grid --lengths 1:6,9,12,18,24,32 --no-geometry";;
    smol-glove-9k-m2) echo "--models smollm2-135m --m 1 2 --samples 6 --source glove100k --bos --protocol paper
      --max-steps 9000 --patience 1500 --search grid --lengths 1:10,16,24,34,46 2:24,34,46,62,82 --no-geometry";;
    smol-tokens-9k-m2) echo "--models smollm2-135m --m 1 2 --samples 6 --source tokens --bos --protocol paper
      --max-steps 9000 --patience 1500 --search grid --lengths 1:6,9,12,17,22,27,32 2:12,17,24,32,42,54
      --no-geometry";;
    smol-glove-9k-m3|smol-tokens-9k-m3) args "${1%-m3}-m2" | sed "s/--m 1 2 /--m 1 2 3 /; s/ 2:\([0-9,]*\)/ 2:\1 3:$(m3_lengths "$1")/";;
    smol-glove-27k|smol-tokens-27k|gemma-27k)   # the 9000 / 1500 run (SmolLM2's at m = 1 and 2) with 3x its
      # steps and patience, each string going on from where that run left it
      case "$1" in gemma-*) nine=gemma-9k;; *) nine="${1%-27k}-9k-m2";; esac
      args "$nine" | sed 's/--max-steps 9000 --patience 1500/--max-steps 27000 --patience 4500 --extend-from 9000\/1500/';;
    *) echo "unknown run '$1' (one of: $RUNS)" >&2; exit 2;;
  esac
}

m3_lengths() {   # the m = 3 grid of a *-9k-m3 run: its m = 2 grid one step up, and one step more
  case "$1" in
    smol-glove-9k-m3) echo "34,46,62,82,108";;
    smol-tokens-9k-m3) echo "17,24,32,42,54,70";;
  esac
}

chain_has() {   # whether a chain running from the live folder has run $1 still to do (or doing)
  pgrep -f "$LIVE/\.chain-[^ ]*\.sh chain( [^ ]+)* $1( |\$)" >/dev/null
}

store_of() {   # the store a run writes to: its own, or (the *-m2 and *-27k runs) that of its m = 1 run
  case "$1" in
    *-m2|*-m3) echo "${1%-m?}";;
    *-27k) echo "${1%-27k}-9k";;
    *) echo "$1";;
  esac
}

after_run() {   # what follows a finished run: under [A]'s protocol, the budget ladder read from its strings
  case "$1" in
    gemma-n50) echo "--add-budget-ladder gemma-3-270m --ladder 1000/500";;
    gemma-9k) echo "--add-budget-ladder gemma-3-270m --ladder 1000/500 3000/500";;
    smol-paper-tokens|smol-*-9k|smol-*-9k-m2|smol-*-9k-m3) echo "--add-budget-ladder smollm2-135m --ladder 1000/500 3000/500";;
    smol-*-27k) echo "--add-budget-ladder smollm2-135m --ladder 1000/500 3000/500 9000/1500";;
    gemma-27k) echo "--add-budget-ladder gemma-3-270m --ladder 1000/500 3000/500 9000/1500";;
  esac
}

live_store() {   # run $1's live store, copied from its committed snapshot on a fresh clone (said in log $2)
  local store
  store=$(store_of "$1")
  mkdir -p "$LIVE"
  if [ ! -f "$LIVE/$store.sqlite" ] && [ -f "$KEPT/$store.sqlite" ]; then
    cp "$KEPT/$store.sqlite" "$LIVE/$store.sqlite"
    echo "$1: resuming from the committed snapshot" >> "$LIVE/$2"
  fi
  # the store as the run starts from it (no run writes to it now): `status` reads the pace of a run
  # resumed after the last snapshots from it; a -wal file left by a stopped run holds its last saves
  rm -f "$LIVE/.start-$store.sqlite" "$LIVE/.start-$store.sqlite-wal" "$LIVE/.start-$store.sqlite-shm"
  if [ -f "$LIVE/$store.sqlite" ]; then
    cp "$LIVE/$store.sqlite" "$LIVE/.start-$store.sqlite"
    [ ! -f "$LIVE/$store.sqlite-wal" ] || cp "$LIVE/$store.sqlite-wal" "$LIVE/.start-$store.sqlite-wal"
  fi
}

check_focus() {   # NAME M STEPS/PATIENCE of a focus, refused with a message naming what is wrong
  args "$1" >/dev/null                                  # unknown names: refused
  [[ "$2" =~ ^[1-9][0-9]*$ ]] && args "$1" | grep -Eq -- "--m( [0-9]+)* $2( |\$)" ||
    { echo "M must be one of the m of run '$1' ($(args "$1" | grep -Eo -- '--m( [0-9]+)+')); got '$2'" >&2; exit 2; }
  [[ "$3" =~ ^[1-9][0-9]*/[1-9][0-9]*$ ]] ||
    { echo "the budget must be STEPS/PATIENCE, whole numbers >= 1 (e.g. 3000/500); got '$3'" >&2; exit 2; }
  args "$1" | grep -q -- "--protocol paper" ||
    { echo "focus needs a run of a constant learning rate (--protocol paper); '$1' has a schedule" >&2; exit 2; }
}

decided() {   # whether every m = $2 string of run $1 has its outcome within budget $3 known (the store says)
  "$PY" -m accesslib store ladder --budget "$3" --m "$2" --decided --store "$LIVE/$(store_of "$1").sqlite"
}

alone_copy() {   # stop every run, then run this script with "$@" from a copy, in the background
  # (named like a focus's copy: resume waits for it, stop ends it); $! is its pid
  local copy
  bash "$SELF" stop
  while pgrep -f "scripts/make_bundles.py .*--store $LIVE/" >/dev/null; do sleep 1; done
  mkdir -p "$LIVE"
  copy=$(mktemp "$LIVE/.focus-XXXXXX.sh")
  cp "$SELF" "$copy"
  nohup bash "$copy" "$@" >/dev/null 2>&1 &
}

resume_plan() {   # from such a copy once its work is done: resume from the script itself, this shell
  # no longer a focus that is running
  rm -f "$SELF"
  trap - EXIT
  exec bash benchmarks/runs/runs.sh resume >/dev/null 2>&1
}

run_one() {   # one run in the foreground (on $2 threads, default 1), resumed from its committed snapshot on a fresh clone
  local name=$1 threads=${2:-1} a store
  a=$(args "$name")
  store=$(store_of "$name")
  mkdir -p "$LIVE"
  # a run on this store is going (this one, or the m = 1 run of an *-m2 run): wait for it, then
  # run this one, which reads the finished strings back from the store (quick)
  while pgrep -f "store $LIVE/$store.sqlite" >/dev/null; do sleep "${RUNS_POLL:-60}"; done
  live_store "$name" "$name.log"
  # shellcheck disable=SC2086
  # --keep-final: each string keeps the state it finished in, so a larger budget goes on from it
  HF_HUB_OFFLINE=1 OMP_NUM_THREADS=$threads "$PY" scripts/make_bundles.py $a --threads "$threads" --keep-final \
    --store "$LIVE/$store.sqlite" --out "$LIVE/$name-bundle" >> "$LIVE/$name.log" 2>&1 </dev/null
  a=$(after_run "$name")   # reached only when the run ended well (set -e): its bundle is written
  [ -z "$a" ] && return
  # shellcheck disable=SC2086
  HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 "$PY" scripts/make_bundles.py $a \
    --store "$LIVE/$store.sqlite" --out "$LIVE/$name-bundle" >> "$LIVE/$name.log" 2>&1 </dev/null
}

case "${1:-}" in
  start)   # each chain in a shell of its own that outlives this one
    shift
    for chain in "$@"; do
      IFS=, read -r -a names <<< "$chain"
      for name in "${names[@]}"; do args "${name#@}" >/dev/null; done   # unknown names: refused first
      # bash reads a script as it runs it: the chain runs a copy, so editing or checking out
      # this file meanwhile cannot change what a running chain does next
      mkdir -p "$LIVE"
      copy=$(mktemp "$LIVE/.chain-XXXXXX.sh")
      cp "$SELF" "$copy"
      nohup bash "$copy" chain "${names[@]}" >/dev/null 2>&1 &
      echo "started $chain (pid $!; logs $LIVE/NAME.log)"
    done;;
  names) echo "$RUNS";;
  args)   # a run's make_bundles.py arguments (the tests parse them)
    args "$2" | tr -s ' \n' '\n' | sed '/^$/d';;
  chain)   # run from a copy (see start) in the repository root
    shift
    trap 'rm -f "$SELF"' EXIT   # the copy goes however the chain ends (a run that fails ends it)
    for name in "$@"; do
      if [ "${name#@}" != "$name" ]; then   # @NAME: wait until no chain has NAME to do
        while chain_has "${name#@}"; do sleep "${RUNS_POLL:-60}"; done
        continue
      fi
      run_one "$name"; touch "$LIVE/.done-$name"
    done;;
  resume)
    mkdir -p "$LIVE"
    # the plan's focus lines first, in order: the first whose budget is not decided yet runs
    # alone, and the chains start when it has ended (it resumes the plan then)
    if pgrep -f "$LIVE/\.focus-[^ ]*\.sh focused" >/dev/null; then
      echo "a focus is running: the plan resumes when it ends"; exit 0
    fi
    while read -r _ name m budget; do
      check_focus "$name" "$m" "$budget"
      live_store "$name" "$name-focus.log"
      if decided "$name" "$m" "$budget" >/dev/null 2>&1; then echo "focus $name $m $budget: decided"; continue; fi
      if [ -f "$LIVE/.focus-ended-$name-$m" ]; then
        echo "focus $name $m $budget: ended undecided (see $LIVE/$name-focus.log; runs.sh focus tries again)"
        continue
      fi
      bash "$SELF" focus "$name" "$m" "$budget"
      exit 0
    done < <(grep -E '^[[:space:]]*focus[[:space:]]' "$PLAN" || true)
    # then its alone lines, in order: the first whose run has not finished here runs whole on every
    # core (runs.sh alone), and the chains start when it has ended
    while read -r _ name; do
      args "$name" >/dev/null                       # unknown names: refused
      if [ -f "$LIVE/.done-$name" ]; then echo "alone $name: finished"; continue; fi
      if [ -f "$LIVE/.alone-failed-$name" ]; then
        echo "alone $name: failed (see $LIVE/$name.log; runs.sh alone tries again)"
        continue
      fi
      bash "$SELF" alone "$name"
      exit 0
    done < <(grep -E '^[[:space:]]*alone[[:space:]]' "$PLAN" || true)
    grep -v '^[[:space:]]*\(#\|$\|focus[[:space:]]\|alone[[:space:]]\)' "$PLAN" | while read -r chain; do
      IFS=, read -r -a names <<< "$chain"
      todo=()
      for name in "${names[@]}"; do
        args "$name" >/dev/null                     # unknown names: refused
        [ -f "$LIVE/.done-$name" ] || todo+=("$name")
      done
      if [ ${#todo[@]} -eq 0 ]; then echo "$chain: finished"; continue; fi
      last=-1   # the last run of the chain that a running chain (of this plan or not) will get to
      for i in "${!todo[@]}"; do
        if chain_has "${todo[$i]}"; then last=$i; fi
      done
      rest=("${todo[@]:$((last + 1))}")
      if [ ${#rest[@]} -eq 0 ]; then echo "$chain: running"; continue; fi
      if [ "$last" -ge 0 ]; then   # the rest waits (@NAME) until no chain has that run to do
        echo "$chain: running up to ${todo[$last]}; the rest waits for it"
        rest=("@${todo[$last]}" "${rest[@]}")
      fi
      bash "$SELF" start "$(IFS=,; echo "${rest[*]}")"
    done;;
  snapshot)
    mkdir -p "$KEPT"
    for live in "$LIVE"/*.sqlite; do
      [ -f "$live" ] || continue
      # the snapshot before this one stays in LIVE (not tracked): `status` reads the run's pace from it
      # (-p: its time is when it was taken)
      [ -f "$KEPT/$(basename "$live")" ] && cp -p "$KEPT/$(basename "$live")" "$LIVE/.before-$(basename "$live")"
      "$PY" -m accesslib store backup "$KEPT/$(basename "$live")" --store "$live"
    done;;
  status)
    for live in "$LIVE"/*.sqlite; do
      [ -f "$live" ] || continue
      name=$(basename "$live" .sqlite)
      state=stopped; pgrep -f "store $live" >/dev/null && state=running
      echo "== $name ($state)"
      extra=""   # the 9000 / 1500 runs: how many of their crammed strings [A]'s patience 500 keeps
      case "$name" in *-9k) extra="--patience 500 --stalls";; esac
      # shellcheck disable=SC2086
      "$PY" -m accesslib store summary --by-length $extra --store "$live"
      case "$name" in *-9k) "$PY" -m accesslib store ladder --budget 1000/500 3000/500 9000/1500 --store "$live";; esac
      # its pace since the snapshot before the last one (20 to 40 minutes: the last one may be only
      # seconds old), and when its open strings reach the running run's step budget
      steps=$(pgrep -af "store $live" | grep -o -- '--max-steps [0-9]*' | head -1 | cut -d' ' -f2 || true)
      before="$LIVE/.before-$name.sqlite"; [ -f "$before" ] || before="$KEPT/$name.sqlite"
      # a run started after that snapshot was taken went on from the store as it found it: a stopped
      # run's steps since the snapshot are not this run's
      start="$LIVE/.start-$name.sqlite"
      if [ -f "$start" ] && { [ ! -f "$before" ] || [ "$start" -nt "$before" ]; }; then before=$start; fi
      if [ "$state" = running ] && [ -f "$before" ]; then
        # since when it runs: a run resumed after that snapshot (a fresh clone) made its steps since then
        pid=$(pgrep -of "store $live" || true)
        secs=$(ps -o etimes= -p "$pid" 2>/dev/null | tr -d ' ' || true)
        since=""; [ -n "$secs" ] && since=$(date -u -d "@$(( $(date +%s) - secs ))" +%FT%T+00:00)
        "$PY" -m accesslib store pace --store "$live" --since "$before" ${steps:+--to-step "$steps"} \
          ${since:+--running-since "$since"} || true
      fi
    done
    # the plan's focus lines: decided, running, ended undecided, or waiting for their turn
    { grep -E '^[[:space:]]*focus[[:space:]]' "$PLAN" 2>/dev/null || true; } | while read -r _ name m budget; do
      if decided "$name" "$m" "$budget" >/dev/null 2>&1; then how=decided
      elif pgrep -f "$LIVE/\.focus-[^ ]*\.sh focused $name $m " >/dev/null; then how=running
      elif [ -f "$LIVE/.focus-ended-$name-$m" ]; then how="ended undecided"
      else how=waiting; fi
      echo "plan: focus $name $m $budget: $how"
    done
    { grep -E '^[[:space:]]*alone[[:space:]]' "$PLAN" 2>/dev/null || true; } | while read -r _ name; do
      if [ -f "$LIVE/.done-$name" ]; then how=finished
      elif pgrep -f "$LIVE/\.focus-[^ ]*\.sh focused-alone $name\$" >/dev/null; then how=running
      elif [ -f "$LIVE/.alone-failed-$name" ]; then how=failed
      else how=waiting; fi
      echo "plan: alone $name: $how"
    done;;
  focus)   # NAME M STEPS/PATIENCE (see the top of this file)
    [ $# -eq 4 ] || { echo "usage: runs.sh focus NAME M STEPS/PATIENCE (e.g. smol-tokens-9k-m3 3 3000/500)" >&2; exit 2; }
    check_focus "$2" "$3" "$4"
    rm -f "$LIVE/.focus-ended-$2-$3"
    alone_copy focused "$2" "$3" "$4"
    echo "focused $2 on m = $3 until $4 is decided (pid $!; log $LIVE/$2-focus.log); then the plan resumes";;
  focused)   # run from a copy (see focus)
    trap 'rm -f "$SELF"' EXIT
    name=$2 m=$3 budget=$4 threads=${RUNS_THREADS:-$(nproc)}
    a=$(args "$name" | sed -E "s/--m( [0-9]+)+ /--m $m /")
    live_store "$name" "$name-focus.log"
    # shellcheck disable=SC2086
    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=$threads "$PY" scripts/make_bundles.py $a --threads "$threads" --keep-final \
      --hold-at "$budget" --store "$LIVE/$(store_of "$name").sqlite" --out "$LIVE/$name-focus-bundle" \
      >> "$LIVE/$name-focus.log" 2>&1 </dev/null || true
    if decided "$name" "$m" "$budget" > "$LIVE/$name-focus-ladder.log" 2>&1; then
      echo "$(date -u '+%F %H:%M') UTC: m = $m decided within $budget" >> "$LIVE/$name-focus.log"
    else   # (the run failed): resume does not start this focus again until the marker goes
      echo "$(date -u '+%F %H:%M') UTC: m = $m not decided within $budget (see $name-focus-ladder.log)" \
        >> "$LIVE/$name-focus.log"
      touch "$LIVE/.focus-ended-$name-$m"
    fi
    resume_plan;;
  alone)   # NAME: every m of the run to its own budget, alone on every core; then the plan resumes
    [ $# -eq 2 ] || { echo "usage: runs.sh alone NAME (e.g. smol-tokens-9k-m3)" >&2; exit 2; }
    args "$2" >/dev/null                                  # unknown names: refused before anything stops
    rm -f "$LIVE/.alone-failed-$2"
    alone_copy focused-alone "$2"
    echo "running $2 alone on ${RUNS_THREADS:-$(nproc)} threads (pid $!; log $LIVE/$2.log); then the plan resumes";;
  focused-alone)   # run from a copy (see alone)
    trap 'rm -f "$SELF"' EXIT
    set +e
    (set -e; run_one "$2" "${RUNS_THREADS:-$(nproc)}")   # its ladder too, as in a chain
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
      touch "$LIVE/.done-$2"
      echo "$(date -u '+%F %H:%M') UTC: ran alone to its end" >> "$LIVE/$2.log"
    else   # resume passes a plan's alone line over now; its chain starts it again and ends there if it fails
      echo "$(date -u '+%F %H:%M') UTC: ran alone and failed (status $rc)" >> "$LIVE/$2.log"
      touch "$LIVE/.alone-failed-$2"
    fi
    resume_plan;;
  ship)   # NAME: a finished run's bundle into the shipped one (see the top of this file)
    [ $# -eq 2 ] || { echo "usage: runs.sh ship NAME (e.g. smol-glove-9k-m3)" >&2; exit 2; }
    name=$2 a=$(args "$2")                                # unknown names: refused
    case "$name" in
      smol-*|gemma-9k|gemma-27k) ;;
      *) echo "ship takes a run measured beside a shipped bundle (smol-*, gemma-9k, gemma-27k); got '$name'" >&2
         exit 2;;
    esac
    echo "$a" | grep -q -- "--protocol paper" ||
      { echo "ship takes a run under [A]'s protocol (--protocol paper); '$name' has a schedule" >&2; exit 2; }
    store=$(store_of "$name")
    if pgrep -f "scripts/make_bundles.py .*--store $LIVE/$store.sqlite" >/dev/null; then
      echo "a run is writing to $LIVE/$store.sqlite: ship '$name' once it has ended" >&2; exit 2
    fi
    model=$(echo "$a" | grep -o -- '--models [^ ]*' | cut -d' ' -f2)
    [ -f "$LIVE/.done-$name" ] && [ -f "$LIVE/$name-bundle/cram-$model.json" ] ||
      { echo "run '$name' has not finished here (no $LIVE/.done-$name with its bundle in $LIVE/$name-bundle/):" \
          "nothing shipped" >&2; exit 2; }
    source=$(echo "$a" | grep -o -- '--source [^ ]*' | cut -d' ' -f2)
    # the run's own budget: a larger run extending its strings (-27k) may write to the same store
    own=$(echo "$a" | grep -o -- '--max-steps [0-9]* --patience [0-9]*' | awk '{print $2 "/" $4}')
    case "$name" in *-m2|*-m3) folder=$store;; *) folder=$name;; esac
    # the readings below read the store's snapshot, taken now (the run has ended: it is the run's
    # final state), so that the commands the bundles record name a file a clone has
    mkdir -p "$KEPT" "$BUNDLES/$folder"
    "$PY" -m accesslib store backup "$KEPT/$store.sqlite" --store "$LIVE/$store.sqlite"
    cp "$LIVE/$name-bundle/cram-$model.json" "$BUNDLES/$folder/"
    HF_HUB_OFFLINE=1 "$PY" scripts/make_bundles.py --add-remeasure "$BUNDLES/$folder"
    HF_HUB_OFFLINE=1 "$PY" scripts/make_bundles.py --add-budget-map "$model" --source "$source" \
      --read-from "$own" --store "$KEPT/$store.sqlite" --map-steps 500 1000 2000 3000 4500 6000 --map-patience 100 250 500 1000
    case "$name" in
      *-9k-m2|*-9k-m3|gemma-9k)   # [A]'s 3000 / 500 at every m, read from the same strings
        three="$BUNDLES/${store%-9k}-3k"
        HF_HUB_OFFLINE=1 "$PY" scripts/make_bundles.py --read-budget 3000/500 --models "$model" \
          --source "$source" --read-from "$own" --store "$KEPT/$store.sqlite" --out "$three"
        HF_HUB_OFFLINE=1 "$PY" scripts/make_bundles.py --add-remeasure "$three";;
    esac
    echo "shipped $name ($BUNDLES/$folder, read from $KEPT/$store.sqlite: commit both);" \
      "the docs and tests that quote its figures follow by hand";;
  stop)   # the chains' (and a focus's) shells first, so that no next run starts
    pkill -TERM -f "$LIVE/\.chain-.*\.sh chain" || true
    pkill -TERM -f "$LIVE/\.focus-.*\.sh focused" || true
    pkill -TERM -f "scripts/make_bundles.py .*--store $LIVE/" || true
    pkill -CONT -f "scripts/make_bundles.py .*--store $LIVE/" || true;;   # a paused one (SIGSTOP) too
  *) sed -n "2,/^set -euo/{/^#/p}" "$SELF"; exit 2;;
esac
