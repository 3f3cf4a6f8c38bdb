# Fastpath: a Linux storage fast-path series on Debian's linux-source-6.12,
# with the tools, tests and benchmarks that drive it in QEMU.
#
#   make demo            set up, build the perf kernel, boot it, run the tour
#   make test            set up, build the debug kernel, run the test suite
#   make bench B=NAME    benchmark scenario NAME (make bench lists them)
#   make bench-insn      guest instructions per I/O of B=userq's (vblk's, copy's, ublk's) two paths
#   make shell [K=debug] interactive guest with the same devices
#   make lint            checkpatch --strict, shellcheck, tools with -Werror, man pages
#   make series-check [FROM=rev]  every patch (after rev) builds on its own, no new sparse/W=1 warnings
#   make series-export [TOPIC=dir]  save commits made in build/src/linux
#   make install [PREFIX=/usr/local] [DESTDIR=dir]  the tools, their man pages, ublkd's udev rule
#   make uninstall [PREFIX=/usr/local] [DESTDIR=dir]  remove what make install put there

K ?= perf
T ?=
export FASTPATH_BUILD := $(CURDIR)/build

.PHONY: all demo docs-check test bench bench-insn insn-profile shell lint setup prepare kernel-perf kernel-debug \
	tools series-check series-export src-reset clean help install uninstall

all: help

help:
	@sed -n '4,/^$$/s/^# *//p' Makefile

setup:
	@scripts/setup.sh

prepare: setup
	@scripts/kernel.sh prepare

kernel-perf kernel-debug: setup
	@scripts/kernel.sh build $(@:kernel-%=%)

# The tools are built against the UAPI headers of the kernel they drive.
tools-%: kernel-%
	@$(MAKE) -s -C tools O=$(CURDIR)/build/tools KHDR=$(CURDIR)/build/kernel-$*/hdr/include
tools: tools-$(K)

demo: tools-perf
	@scripts/demo.sh

# The guides' examples (docs/*.md, blocks marked "sh guest") in the perf guest.
docs-check: tools-perf
	@scripts/docs-check.sh $(DOC)

# QUICK=1 runs only the quick tests; TIMEOUT=S how long timed tests run;
# TRACE=1 traces each test (scripts/trace-gaps.py reads the traces).
test: tools-debug
	@QUICK=$(QUICK) TIMEOUT=$(TIMEOUT) TRACE=$(TRACE) scripts/test.sh $(T)

bench: tools-perf
	@scripts/bench.sh $(B)

# The QEMU plugin runs on the host, so it is not one of tools/.
insn-profile:
	@$(MAKE) -s -C bench/insn-profile O=$(CURDIR)/build/insn-profile

# Scenarios with an instruction profile: userq (the default) and vblk
# (bench/insn-userq.sh, bench/insn-vblk.sh).
bench-insn: tools-perf insn-profile
	@$(if $(filter-out userq vblk copy ublk,$(B)),$(error bench-insn: B=userq, B=vblk, B=copy or B=ublk),)scripts/bench-insn.sh $(B)

shell: tools-$(K)
	@vm/run -i -k $(K) -p $(if $(P),$(P),test)

lint: prepare
	@scripts/lint.sh

series-check: kernel-perf
	@FROM=$(FROM) scripts/series-check.sh

series-export:
	@scripts/kernel.sh export $(TOPIC)

src-reset:
	@scripts/kernel.sh reset

# The tools of build/tools (built against K's headers, the perf kernel's by
# default, as make demo runs them), in $(PREFIX)/sbin and /bin, their man
# pages (tools/man) in $(PREFIX)/share/man, and ublkd's udev rule for
# unprivileged devices in /etc/udev/rules.d with its helper (tools/Makefile).
PREFIX ?= /usr/local
DESTDIR ?=
install: tools-$(K)
	@$(MAKE) -C tools --no-print-directory install O=$(CURDIR)/build/tools \
		KHDR=$(CURDIR)/build/kernel-$(K)/hdr/include PREFIX=$(PREFIX) DESTDIR=$(DESTDIR)

uninstall:
	@$(MAKE) -C tools --no-print-directory uninstall PREFIX=$(PREFIX) DESTDIR=$(DESTDIR)

clean:
	rm -rf build results
