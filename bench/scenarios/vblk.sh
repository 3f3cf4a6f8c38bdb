# shellcheck shell=bash
# virtio-blk block path (O_DIRECT on /dev/vdX) vs io_uring passthrough on its
# char device (/dev/vdXc0, IORING_OP_URING_CMD), 4 KiB random reads on a
# null-co backed disk, so only the guest's software path differs.
#  - qd1: latency-bound, one IO at a time (-t1 records mean latency),
#    pinned to CPU 1, where the virtio-blk interrupt lands (see
#    bench/breakdown.md: unpinned, wakeups across CPUs add noise);
#  - d8-s4-c4: the design's t/io_uring line, pinned to one guest CPU; its
#    -O0 makes the block side buffered (page cache), as in the published
#    1.87x, so d8-s4-c4-direct repeats it with O_DIRECT on the block side,
#    the comparison that isolates the bio/blk-mq cost;
#  - d8-s4-c4-poll: O_DIRECT block path vs passthrough, both polled on the
#    poll queue (IOPOLL ring; polling needs O_DIRECT on the block side);
#  - qd1-poll: the same at QD1, where the per-command completion cost is
#    not shared with other commands of a batch.
#  - fio-qd1, fio-qd1-poll, fio-d8-direct: the same comparisons with fio
#    (build/fio: Debian's fio with fio/patches), the io_uring engine with
#    O_DIRECT on /dev/vdX against io_uring_cmd with cmd_type=vblk on
#    /dev/vdXc0, registered files, as iobench does; in the same boot,
#    interleaved with the iobench cases. fio's JSON gives IOPS and the
#    completion latency percentiles (clat_ns) the report shows.
DESCRIPTION="virtio-blk block path vs vdXc0 passthrough, 4 KiB randread"
RUNS=${RUNS:-5}
RUNTIME=${RUNTIME:-5}

cases() {
	_find_vblk_passthru || { echo "bench vblk: no virtio-blk char device" >&2; exit 1; }
	local qd1="-b4096 -p0 -B0 -F1 -R1 -t1 -r$RUNTIME -d1 -s1 -c1"
	local d8="-b4096 -d8 -c4 -s4 -F1 -B0 -O0 -n1 -R1 -r$RUNTIME"
	CPU=1 bench_case qd1 "$qd1 -O1 $VBLK_DEV" "$qd1 -u1 $VBLK_CHR"
	CPU=1 bench_case d8-s4-c4 "$d8 -p0 $VBLK_DEV" "$d8 -p0 -u1 $VBLK_CHR"
	CPU=1 bench_case d8-s4-c4-direct "${d8/-O0/-O1} -p0 $VBLK_DEV" \
		"$d8 -p0 -u1 $VBLK_CHR"
	CPU=1 bench_case d8-s4-c4-poll "${d8/-O0/-O1} -p1 $VBLK_DEV" \
		"$d8 -p1 -u1 $VBLK_CHR"
	CPU=1 bench_case qd1-poll "${qd1/-p0/-p1} -O1 $VBLK_DEV" \
		"${qd1/-p0/-p1} -u1 $VBLK_CHR"

	# one line each: the commands go into cases.tsv as they are
	local fio="fio --name=vblk --rw=randread --bs=4k --time_based --runtime=$RUNTIME"
	fio+=" --norandommap --randrepeat=0"
	# engine options after --ioengine, or fio does not know them yet
	local blk="--ioengine=io_uring --registerfiles=1 --direct=1 --filename=$VBLK_DEV"
	local pt="--ioengine=io_uring_cmd --registerfiles=1 --cmd_type=vblk --filename=$VBLK_CHR"
	local d8="--iodepth=8 --iodepth_batch_submit=4 --iodepth_batch_complete_min=4"
	CPU=1 bench_case fio-qd1 "$fio --iodepth=1 $blk" "$fio --iodepth=1 $pt"
	CPU=1 bench_case fio-qd1-poll "$fio --iodepth=1 $blk --hipri=1" \
		"$fio --iodepth=1 $pt --hipri=1"
	CPU=1 bench_case fio-d8-direct "$fio $d8 $blk" "$fio $d8 $pt"
}
