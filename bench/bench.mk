# SPDX-License-Identifier: GPL-2.0
# The bench's own tools, built into build/bench/ next to podinject's build
# (whose skeletons progcost links against). Called by bench/run.sh after
# `make all`; never part of the main build.
BUILD      ?= build
OUT        := $(BUILD)/bench
CC         ?= gcc
CLANG      ?= clang
BPFTOOL    ?= bpftool
ARCH       := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')
CFLAGS     := -O2 -g -Wall -Wextra -Werror -Wno-unused-parameter \
	      -Wno-unused-result -D_GNU_SOURCE -Iinclude -I$(BUILD) -I$(OUT)
LDLIBS     := -lbpf -lelf -lz
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror -I$(BUILD)

.DELETE_ON_ERROR:
.PHONY: all
all: $(OUT)/pktload $(OUT)/pbload $(OUT)/progcost $(OUT)/transparent.so $(OUT)/cnirun \
     $(OUT)/cninoop

$(OUT):
	@mkdir -p $@

$(OUT)/bench.bpf.o: bench/bpf/bench.bpf.c $(BUILD)/vmlinux.h | $(OUT)
	@printf '  %-8s %s\n' BPF $@
	@$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUT)/bench.skel.h: $(OUT)/bench.bpf.o
	@printf '  %-8s %s\n' SKEL $@
	@$(BPFTOOL) gen skeleton $< name bench_bpf > $@

$(OUT)/pktload: bench/pktload.c | $(OUT)
	@printf '  %-8s %s\n' CC $@
	@$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

$(OUT)/pbload: bench/pbload.c $(OUT)/bench.skel.h
	@printf '  %-8s %s\n' CC $@
	@$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

$(OUT)/progcost: bench/progcost.c lib/cls.c lib/cls.h $(BUILD)/node.skel.h $(BUILD)/inject.skel.h include/podinject_abi.h include/podinject_cls.h | $(OUT)
	@printf '  %-8s %s\n' CC $@
	@$(CC) $(CFLAGS) -Ilib bench/progcost.c lib/cls.c -o $@ $(LDLIBS)

$(OUT)/transparent.so: bench/transparent.c | $(OUT)
	@printf '  %-8s %s\n' CC $@
	@$(CC) $(CFLAGS) -fPIC -shared $< -o $@ -ldl

$(OUT)/cnirun: bench/cnirun.c | $(OUT)
	@printf '  %-8s %s\n' CC $@
	@$(CC) $(CFLAGS) $< -o $@ -ljansson

$(OUT)/cninoop: bench/cninoop.c | $(OUT)
	@printf '  %-8s %s\n' CC $@
	@$(CC) $(CFLAGS) $< -o $@ -ljansson
