# SPDX-License-Identifier: GPL-2.0
# Suite "apply": wall time of `podinject apply -f FILE` (the CLI's whole
# run: read, parse, check, compile, publish) for
#   - 10 000 rules on one pod, from no rules;
#   - 1 000 rules on one pod, from no rules (beside `policy add` x 1 000);
#   - 1 000 pods with 10 rules each, from no rules;
#   - each file applied again (nothing changes: goal <= 10 % of the first),
#     with the last apply's record and without it (the document parsed);
# and `policy add` x 1 000 through the CLI (each add recompiles the pod's
# whole policy), every round; with PB_APPLY_ADDS_10K=1 also `policy add`
# x 10 000 once, in round 1 only, beside that round's apply of 10 000 (off
# by default: 3 min 40 s to 7 min on this machine, t_policy_10k's figure). Before each timed apply the node is emptied with an
# apply of an empty document, not timed. The 1 000 pods are veth pairs made
# with `ip -batch` (their pod sides in one namespace), adopted one by one
# before the rounds; the node uses clsact so that their setup is short (a
# policy is maps only: the attach mode plays no part in what is timed).
# Goals (issue 21): 10 000 rules <= 1 s, 1 000 pods x 10 rules <= 5 s,
# the same file again <= 10 % of the first.

APPLY_NODE=$PB_PREFIX-ap1
APPLY_NODE_MANY=$PB_PREFIX-apn
APPLY_PODS_NS=$PB_PREFIX-appods

apply_ms() {	# apply_ms NODE FILE: "WALL CPU" ms of one apply (CPU: user +
		# system, which a busy machine inflates less); nothing on failure
	local t0 t1 cpu TIMEFORMAT='%3U %3S'
	t0=$(date +%s%N)
	cpu=$( { time "$PI" -N "$1" apply -f "$2" >/dev/null 2>&1; } 2>&1 ) || return 1
	t1=$(date +%s%N)
	echo "$(( (t1 - t0) / 1000000 )) $(awk '{ printf "%.1f", ($1 + $2) * 1000 }' <<<"$cpu")"
}

# apply_rules_doc POD COUNT [POD_COUNT]: a document; with POD_COUNT, pods
# apply/pod-0 .. apply/pod-(POD_COUNT - 1) get COUNT rules each
apply_rules_doc() {
	jq -n --arg pod "$1" --argjson n "$2" --argjson pods "${3:-0}" '
		def rules($k): [range($n) as $i | (($k * $n + $i) % 65536) as $j |
			{action: (if $i % 2 == 0 then "deny" else "allow" end),
			 to: "10.\($j / 256 | floor).\($j % 256).0/24",
			 proto: (if $i % 3 == 0 then "udp" else "tcp" end),
			 port: (1 + ($j * 7) % 65535)}];
		{apiVersion: "podinject/v1",
		 pods: (if $pods == 0 then {($pod): {egress: rules(0)}}
			else [range($pods) as $k | {key: "apply/pod-\($k)",
				value: {egress: rules($k)}}] | from_entries end)}'
}

apply_sample() {	# apply_sample VARIANT REP NODE FILE: its wall and CPU ms
	local r
	r=$(apply_ms "$3" "$4")
	sample wall_ms ms "$1" "$2" "${r% *}"
	sample cpu_ms ms "$1" "$2" "${r#* }"
}

apply_record() {	# apply_record NODE: the file of its last apply's record
	echo "/run/podinject/apply/$(basename "$("$PI" -N "$1" -j node show | jq -r .pin_dir)")"
}

apply_make_pods() {	# apply_make_pods COUNT: veth pairs, adopted
	local count=$1 i batch fails=0
	batch=$(mktemp)
	pb_ns "$APPLY_PODS_NS"
	for i in $(seq 0 $((count - 1))); do
		echo "link add pbap$i type veth peer name p$i netns $APPLY_PODS_NS"
		echo "link set pbap$i up"
	done >"$batch"
	# iproute2 6.1 keeps each 'netns NAME' open in batch mode
	(ulimit -n 8192 2>/dev/null || ulimit -Sn "$(ulimit -Hn)"; ip -n "$APPLY_NODE_MANY" -batch "$batch") || fails=1
	for i in $(seq 0 $((count - 1))); do
		echo "addr add 10.$((200 + i / 65536)).$((i / 256 % 256)).$((i % 256))/32 dev p$i"
		echo "link set p$i up"
	done >"$batch"
	(ulimit -n 8192 2>/dev/null || ulimit -Sn "$(ulimit -Hn)"; ip -n "$APPLY_PODS_NS" -batch "$batch") || fails=1
	rm -f "$batch"
	for i in $(seq 0 $((count - 1))); do
		"$PI" -N "$APPLY_NODE_MANY" pod adopt "apply/pod-$i" --netns "$APPLY_PODS_NS" \
			--dev pbap$i >/dev/null 2>&1 || fails=$((fails + 1))
	done
	echo "$fails"
}

suite_apply() {
	local d rep ms v t0 t1 i fails pods=${PB_APPLY_PODS:-1000} adds=${PB_APPLY_ADDS:-1000}
	suite_begin apply "Desired state: podinject apply of a whole file, against policy add one rule at a time"
	meta method "\"wall time of each CLI run (date +%s%N around it): apply -f FILE from no rules, the same file again, and policy add x N in a shell loop\""
	d=$(mktemp -d /tmp/pb-apply.XXXXXX)
	PB_NODES+=("$APPLY_NODE" "$APPLY_NODE_MANY")
	"$PI" -N "$APPLY_NODE" node up >/dev/null &&
		"$PI" -N "$APPLY_NODE" pod add $PB_PREFIX-ap-a --ip 10.199.0.10 >/dev/null || failed setup "node $APPLY_NODE or its pod"
	"$PI" -N "$APPLY_NODE_MANY" node up --attach clsact >/dev/null || failed setup "node $APPLY_NODE_MANY"
	t0=$(date +%s)
	fails=$(apply_make_pods "$pods")
	t1=$(date +%s)
	[ "$fails" = 0 ] || failed setup "$fails of $pods pods could not be made"
	note "$pods pods made and adopted in $((t1 - t0)) s (not timed)"
	echo '{"apiVersion": "podinject/v1"}' >"$d/empty.json"
	apply_rules_doc $PB_PREFIX-ap-a 10000 >"$d/10k.json"
	apply_rules_doc $PB_PREFIX-ap-a "$adds" >"$d/adds.json"
	apply_rules_doc x 10 "$pods" >"$d/pods.json"
	# policy add's arguments, the same rules as adds.json
	jq -r '.pods[].egress[] | "\(.action) to \(.to) proto \(.proto) port \(.port)"' \
		"$d/adds.json" >"$d/adds.args"
	jq -r '.pods[].egress[] | "\(.action) to \(.to) proto \(.proto) port \(.port)"' \
		"$d/10k.json" >"$d/10k.args"

	for rep in $(seq 1 "$PB_REPS"); do
		pb_alive "$APPLY_PODS_NS" "$APPLY_NODE" "$APPLY_NODE_MANY" || break
		for v in "10k" "adds" "pods"; do
			local node=$APPLY_NODE name
			case $v in
			10k) name="10 000 rules, one pod" ;;
			adds) name="$adds rules, one pod" ;;
			pods) name="$pods pods x 10 rules"; node=$APPLY_NODE_MANY ;;
			esac
			"$PI" -N "$node" apply -f "$d/empty.json" >/dev/null
			apply_sample "$name: apply" "$rep" "$node" "$d/$v.json"
			apply_sample "$name: apply again" "$rep" "$node" "$d/$v.json"
			# the same without the last apply's record: the document parsed
			rm -f "$(apply_record "$node")"
			apply_sample "$name: apply again, no record" "$rep" "$node" "$d/$v.json"
			if [ "$("$PI" -N "$node" apply -f "$d/$v.json")" != "" ]; then
				failed "$v/round$rep" "a third apply of the same file changed something"
			fi
		done
		# the same rules through policy add, one CLI call each
		"$PI" -N "$APPLY_NODE" apply -f "$d/empty.json" >/dev/null
		t0=$(date +%s%N)
		while read -r line; do
			# shellcheck disable=SC2086
			"$PI" -N "$APPLY_NODE" policy add $PB_PREFIX-ap-a egress $line >/dev/null || { failed "adds/round$rep" "policy add $line failed"; break; }
		done <"$d/adds.args"
		t1=$(date +%s%N)
		sample wall_ms ms "$adds rules, one pod: policy add x $adds" "$rep" $(( (t1 - t0) / 1000000 ))
		if [ "$("$PI" -N "$APPLY_NODE" export | jq --arg p "$PB_PREFIX-ap-a" '.pods[$p].egress == input.pods[$p].egress' - "$d/adds.json")" != true ]; then
			failed "adds/round$rep" "policy add x $adds did not make the file's rules"
		fi
		if [ "$rep" = 1 ] && [ "${PB_APPLY_ADDS_10K:-0}" = 1 ]; then
			"$PI" -N "$APPLY_NODE" apply -f "$d/empty.json" >/dev/null
			t0=$(date +%s%N)
			while read -r line; do
				# shellcheck disable=SC2086
				"$PI" -N "$APPLY_NODE" policy add $PB_PREFIX-ap-a egress $line >/dev/null || { failed "adds10k" "policy add $line failed"; break; }
			done <"$d/10k.args"
			t1=$(date +%s%N)
			sample wall_ms ms "10 000 rules, one pod: policy add x 10 000 (round 1 only)" 1 $(( (t1 - t0) / 1000000 ))
		fi
	done
	# the check the goals stand on: what apply made is what the file says
	"$PI" -N "$APPLY_NODE_MANY" apply -f "$d/pods.json" >/dev/null
	if [ "$("$PI" -N "$APPLY_NODE_MANY" -j policy list | jq length)" != $((pods * 10)) ]; then
		failed pods "the node does not hold $((pods * 10)) rules after the apply"
	fi
	ratio "10 000 rules: apply again / apply" wall_ms "10 000 rules, one pod: apply again" "10 000 rules, one pod: apply"
	ratio "$pods pods x 10 rules: apply again / apply" wall_ms "$pods pods x 10 rules: apply again" "$pods pods x 10 rules: apply"
	ratio "$adds rules: apply again / apply" wall_ms "$adds rules, one pod: apply again" "$adds rules, one pod: apply"
	ratio "10 000 rules: apply again / apply, CPU time" cpu_ms "10 000 rules, one pod: apply again" "10 000 rules, one pod: apply"
	ratio "$pods pods x 10 rules: apply again / apply, CPU time" cpu_ms "$pods pods x 10 rules: apply again" "$pods pods x 10 rules: apply"
	ratio "10 000 rules: apply again without the record / apply" wall_ms "10 000 rules, one pod: apply again, no record" "10 000 rules, one pod: apply"
	ratio "$pods pods x 10 rules: apply again without the record / apply" wall_ms "$pods pods x 10 rules: apply again, no record" "$pods pods x 10 rules: apply"
	ratio "$adds rules: policy add x $adds / apply" wall_ms "$adds rules, one pod: policy add x $adds" "$adds rules, one pod: apply"
	if [ "${PB_APPLY_ADDS_10K:-0}" = 1 ]; then
		ratio "10 000 rules: policy add x 10 000 / apply (round 1)" wall_ms "10 000 rules, one pod: policy add x 10 000 (round 1 only)" "10 000 rules, one pod: apply"
	fi
	note "goals (issue 21): 10 000 rules on one pod <= 1000 ms; $pods pods x 10 rules <= 5000 ms; the same file again <= 10 % of the first apply"
	rm -rf "$d"
	suite_end
}
