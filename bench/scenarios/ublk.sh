# shellcheck shell=bash
# ublkd's three data modes measured with fio as the NEED_GET_DATA authors
# did (libaio, direct=1, numjobs=1), all in one boot:
#  1. null-{write,randwrite}-qd1: QD1 4 KiB writes on the plain null target,
#     flag off (baseline) vs NEED_GET_DATA (feature): the published ~1.9x;
#  2. memcpy-BS-gd / memcpy-BS-uc: QD1 randwrite on `null --memcpy` (the
#     target copies into its own pool), 4k..1m: the default mode (two
#     memcpys, baseline) vs NEED_GET_DATA (one, -gd) and vs USER_COPY (-uc);
#  3. memcpy-b16-BS-gd / -uc: the same at --iodepth=64 with submit and
#     complete batches of 16, as the maintainer proposed;
#  4. nbd-BS-gd / -uc: the nbd target against a local nbdkit (memory), 64k
#     and 1m randwrite at QD1;
#  5. rublk-*: rublk's null target (baseline: ours) 4k randread/randwrite at
#     QD1 and QD64, when bench/scenarios/ublk.host could install it in
#     build/rublk (cargo install rublk --no-default-features); otherwise
#     the report says it was not run.
#
# bench/run's loop drives iobench with one baseline and one feature; this
# scenario needs fio, three variants and a device per variant, so cases()
# runs its own loop and exits: it writes what bench/run would (setup.txt,
# cases.tsv, one JSON per run with iops and lat_ns.mean) for bench/report.py.
# Variants rotate every run (default gd uc, then uc gd default, ...); the
# default-mode runs of a block size are shared by its -gd and -uc cases.
# It also writes results/bench/ublk-latency.png: QD1 latency against block
# size for the three modes.
DESCRIPTION="ublkd data modes: default vs NEED_GET_DATA vs USER_COPY (fio)"
RUNS=${RUNS:-5}
RUNTIME=${RUNTIME:-3}	# seconds per fio run

UBLKD=$TOOLS/ublkd
declare -A DEV
# shellcheck source=bench/ublk-server.sh
. "$REPO/bench/ublk-server.sh"

# ublk_dev VARIANT ARGS...: a device for VARIANT.
ublk_dev() {
	local v=$1 d
	shift
	d=$(ublk_server "$UBLKD" add "$@") || { echo "bench ublk: ublkd add $* failed" >&2; exit 1; }
	DEV[$v]=$d
	echo "  $v: $d ($*)"
}

# fio_run OUT DEV RW BS QD [fio args]: one run; OUT gets iops, mean latency.
fio_run() {
	local out=$1 dev=$2 rw=$3 bs=$4 qd=$5
	shift 5
	fio --name=ublk --filename="$dev" --rw="$rw" --bs="$bs" --iodepth="$qd" \
		--ioengine=libaio --direct=1 --numjobs=1 --time_based \
		--runtime="$RUNTIME" --output-format=json "$@" > "$out.fio" 2>&1 || {
		echo "bench ublk: fio failed on $dev ($rw $bs qd$qd)" >&2
		cat "$out.fio" >&2
		exit 1
	}
	/usr/bin/python3 - "$out.fio" "$out" <<-'EOF'
	import json, sys
	raw = open(sys.argv[1]).read()
	j = json.loads(raw[raw.index("{"):])["jobs"][0]
	side = j["write"] if j["write"]["io_bytes"] else j["read"]
	json.dump({"iops": side["iops"], "lat_ns": {"mean": side["lat_ns"]["mean"]}},
	          open(sys.argv[2], "w"))
	EOF
}

# A case: NAME BASE_VARIANT FEAT_VARIANT[,FEAT_VARIANT] RW BS QD [fio args]
CASES=()
# CASES_RE=REGEX keeps only the cases whose name matches (a quick look).
ublk_case() {
	[[ $1 =~ ${CASES_RE:-.} ]] && CASES+=("$*")
	return 0
}

fio_cmd() { # the command line a variant runs, for the report
	local v=$1 rw=$2 bs=$3 qd=$4
	shift 4
	echo "fio --filename=${DEV[$v]} ($v) --rw=$rw --bs=$bs --iodepth=$qd --ioengine=libaio --direct=1 --numjobs=1 --time_based --runtime=$RUNTIME $*"
}

plot_latency() {
	/usr/bin/python3 - "$out" "$FASTPATH_RESULTS/bench/ublk-latency.png" "$RUNS" <<-'EOF'
	import json, os, statistics, sys
	raw, png, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
	sizes = ["4k", "64k", "128k", "256k", "512k", "1m"]
	def med(case, var):
	    v = [json.load(open(os.path.join(raw, f"{case}.{var}.{n}.json")))["lat_ns"]["mean"] / 1000
	         for n in range(1, runs + 1)]
	    return statistics.median(v)
	try:
	    import matplotlib
	    matplotlib.use("Agg")
	    import matplotlib.pyplot as plt
	except ImportError:
	    sys.exit(0)
	fig, ax = plt.subplots(figsize=(7, 4))
	for prefix, style in (("memcpy", "-"), ("memcpy-b16", "--")):
	    for label, case, var in (("default (2 memcpy)", "gd", "baseline"),
	                             ("NEED_GET_DATA (1 memcpy)", "gd", "feature"),
	                             ("USER_COPY", "uc", "feature")):
	        pts = []
	        for s in sizes:
	            try:
	                pts.append((s, med(f"{prefix}-{s}-{case}", var)))
	            except FileNotFoundError:	# case left out by CASES_RE
	                pass
	        if not pts:
	            continue
	        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o",
	                label=f"{label}{', QD64 batch 16' if 'b16' in prefix else ', QD1'}")
	ax.set_xlabel("block size (randwrite, null --memcpy)")
	ax.set_ylabel("mean latency (us, median of runs)")
	ax.set_yscale("log")
	ax.legend(fontsize=7)
	fig.tight_layout()
	fig.savefig(png, dpi=110)
	EOF
}

cases() {
	local bs v i run name base rw qd args order rev sfx cname
	# The guest's scratch directory: /tmp is the host's, read-only, when
	# the checkout lives under it (vm/guest-init sets TMPDIR then).
	local sock=${TMPDIR:-/tmp}/ublk-bench-nbd.sock
	modprobe ublk_drv
	echo "bench ublk: devices"
	ublk_dev null-default -t null -q 1 -d 128
	ublk_dev null-gd -t null -q 1 -d 128 --get-data
	ublk_dev memcpy-default "${UBLK_MEMCPY_ARGS[@]}"
	ublk_dev memcpy-gd "${UBLK_MEMCPY_ARGS[@]}" --get-data
	ublk_dev memcpy-uc "${UBLK_MEMCPY_ARGS[@]}" --user-copy
	nbdkit -f -U "$sock" memory 1G > /dev/null 2>&1 &
	for i in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
	[ -S "$sock" ] || { echo "bench ublk: nbdkit did not listen on $sock within 30 s" >&2; exit 1; }
	ublk_dev nbd-default -t nbd --unix "$sock" -q 1 -d 32
	ublk_dev nbd-gd -t nbd --unix "$sock" -q 1 -d 32 --get-data
	ublk_dev nbd-uc -t nbd --unix "$sock" -q 1 -d 32 --user-copy
	RUBLK=no
	# bench/scenarios/ublk.host installed it in the checkout, which the
	# guest sees (root's home it does not).
	local rublk=$REPO/build/rublk/bin/rublk
	if [ ! -x "$rublk" ]; then
		echo "  rublk: not installed in build/rublk (see bench/scenarios/ublk.host), no rublk cases" >&2
	else
		local d added
		# rublk add prints the device's info, "dev id N: ...".
		added=$(ublk_server "$rublk" add null -q 1 -d 128 2>&1)
		d=$(sed -n 's/^dev id \([0-9]*\):.*/\/dev\/ublkb\1/p' <<< "$added" | head -n1)
		for i in $(seq 50); do [ -n "$d" ] && [ -b "$d" ] && break; sleep 0.1; done
		if [ -n "$d" ] && [ -b "$d" ]; then
			DEV[rublk]=$d RUBLK=yes
			echo "  rublk: $d (rublk add null -q 1 -d 128)"
		else
			echo "  rublk: add failed, no rublk cases: $added" >&2
		fi
	fi

	ublk_case null-write-qd1 null-default null-gd write 4k 1
	ublk_case null-randwrite-qd1 null-default null-gd randwrite 4k 1
	for bs in 4k 64k 128k 256k 512k 1m; do
		ublk_case "memcpy-$bs" memcpy-default memcpy-gd,memcpy-uc randwrite "$bs" 1
	done
	for bs in 4k 64k 128k 256k 512k 1m; do
		ublk_case "memcpy-b16-$bs" memcpy-default memcpy-gd,memcpy-uc randwrite "$bs" 64 \
			--iodepth_batch_submit=16 --iodepth_batch_complete_min=16
	done
	for bs in 64k 1m; do
		ublk_case "nbd-$bs" nbd-default nbd-gd,nbd-uc randwrite "$bs" 1
	done
	if [ "$RUBLK" = yes ]; then
		for rw in randread randwrite; do
			for qd in 1 64; do
				ublk_case "rublk-$rw-qd$qd" null-default rublk "$rw" 4k "$qd"
			done
		done
	fi

	{
		echo "kernel=$(uname -r)"
		[ "$RUBLK" = yes ] && echo "description=$DESCRIPTION" ||
			echo "description=$DESCRIPTION (rublk not available: no rublk cases)"
		echo "runs=$RUNS"
		echo "cpus=$(nproc)"
		echo "note=the servers run with GLIBC_TUNABLES=${UBLK_SERVER_TUNABLES:-(none)}"
		for v in "${!DEV[@]}"; do echo "device=$v ${DEV[$v]}"; done
	} > "$out/setup.txt"
	: > "$out/cases.tsv"

	echo "bench ublk: ${#CASES[@]} cases x $RUNS runs, variants rotated every run"
	for run in $(seq "$RUNS"); do
		for i in "${!CASES[@]}"; do
			# shellcheck disable=SC2086 # a case is a word list
			set -- ${CASES[$i]}
			name=$1 base=$2
			IFS=, read -r -a order <<< "$3"
			order=("$base" "${order[@]}")
			rw=$4 bs=$5 qd=$6
			shift 6
			args=("$@")
			if [ $((run % 2)) = 0 ]; then	# reversed (no <(...): no /dev/fd in the guest)
				rev=()
				for v in "${order[@]}"; do rev=("$v" "${rev[@]}"); done
				order=("${rev[@]}")
			fi
			for v in "${order[@]}"; do
				fio_run "$out/$name.$v.$run.json" "${DEV[$v]}" "$rw" "$bs" "$qd" "${args[@]}"
			done
			# Pairs for the report: baseline = $base, feature = each other variant.
			for v in "${order[@]}"; do
				[ "$v" = "$base" ] && continue
				sfx=${v##*-}
				[ "$v" = rublk ] && sfx=""
				cname=$name${sfx:+-$sfx}
				cp "$out/$name.$base.$run.json" "$out/$cname.baseline.$run.json"
				cp "$out/$name.$v.$run.json" "$out/$cname.feature.$run.json"
				if [ "$run" = 1 ]; then
					printf '%s\t%s\t%s\n' "$cname" "$(fio_cmd "$base" "$rw" "$bs" "$qd" "${args[@]}")" \
						"$(fio_cmd "$v" "$rw" "$bs" "$qd" "${args[@]}")" >> "$out/cases.tsv"
				fi
				printf '  %-22s run %d: %s %.0f IOPS, %s %.0f IOPS\n' "$cname" "$run" \
					"$base" "$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['iops'])" "$out/$name.$base.$run.json")" \
					"$v" "$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['iops'])" "$out/$name.$v.$run.json")"
			done
		done
	done
	plot_latency
	"$UBLKD" del -a
	[ "$RUBLK" = yes ] && "$rublk" del -a > /dev/null 2>&1
	exit 0
}
