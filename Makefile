# SPDX-License-Identifier: GPL-2.0
# podinject build. `make` builds everything into build/; nothing generated is
# committed. V=1 shows the full commands.

BUILD     ?= build
CC        ?= gcc
CLANG     ?= clang
BPFTOOL   ?= bpftool
ARCH      := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

CFLAGS    ?= -O2 -g
# make SANITIZE=1: the CLI, the library, the plugin and the proxy with
# ASan and UBSan, in a build folder of their own (tests: PODINJECT_BUILD).
ifeq ($(SANITIZE),1)
BUILD     := build-san
CFLAGS    += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# The unit tests lay wire headers over byte buffers, as a wire does.
UNIT_CFLAGS := -fno-sanitize=alignment
endif
CFLAGS    += -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation -Iinclude -I$(BUILD) -D_GNU_SOURCE
# The library's own headers are for the library and its unit tests; the
# CLI sees the public header only.
LIB_CFLAGS := -Ilib
# The public header as an installed copy of it would be: alone in a folder
# of its own. The CLI and the API's tests compile against it, not include/,
# so that they can use nothing but the API (no datapath header).
PUBLIC_INC := $(BUILD)/public-include
PUBLIC_HDR := $(PUBLIC_INC)/podinject/podinject.h
PUBLIC_CFLAGS = $(filter-out -Iinclude,$(CFLAGS)) -I$(PUBLIC_INC)
LDLIBS    := -lbpf -lelf -lz -lmnl -ljansson -lyaml -pthread
# BPF_EXTRA_CFLAGS: the bench's variant builds only (bench/suites/progcost.sh)
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
	      -Iinclude -Ibpf -I$(BUILD) $(BPF_EXTRA_CFLAGS)

# Debian packages the build, the tests and the demo need. libclang-rt-14-dev
# holds clang's libFuzzer and sanitizer runtimes (make fuzz, t_fuzz): clang
# only recommends it, and deps installs no recommended packages.
DEB_PACKAGES := make gcc clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev \
	libmnl-dev iproute2 iputils-ping iperf3 jq procps ethtool \
	libjansson-dev containernetworking-plugins podman runc busybox-static \
	catatonit buildah haproxy containerd protobuf-compiler python3-grpcio \
	python3-protobuf libclang-rt-14-dev libmicrohttpd-dev prometheus \
	libyaml-dev yq libssl-dev openssl tcpdump python3 nettle-dev strace

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

BPF_PROGS := node inject xdp
BPF_OBJS  := $(patsubst %,$(BUILD)/%.bpf.o,$(BPF_PROGS))
SKELS     := $(patsubst %,$(BUILD)/%.skel.h,$(BPF_PROGS))

# libpodinject: the control plane (lib/), one public header
# (include/podinject/podinject.h). The CLI (src/) parses, calls it, prints.
LIB_SRCS  := $(wildcard lib/*.c)
CLI_SRCS  := $(wildcard src/*.c)
LIB_OBJS  := $(patsubst lib/%.c,$(BUILD)/lib/%.o,$(LIB_SRCS))
CLI_OBJS  := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CLI_SRCS))
LIBPI     := $(BUILD)/libpodinject.a

UNIT_SRCS := $(wildcard tests/unit/*.c)
TOOLS     := $(patsubst tests/tools/%.c,$(BUILD)/%,$(wildcard tests/tools/*.c))

.DELETE_ON_ERROR:
.SECONDARY:
.PHONY: all deps test demo bench bench-lab lab clean image

TEST_BPF  := $(patsubst tests/bpf/%.bpf.c,$(BUILD)/%.bpf.o,$(wildcard tests/bpf/*.bpf.c))

all: $(LIBPI) $(BUILD)/podinject $(BUILD)/podinject-proxy $(BUILD)/podinject-cni $(BUILD)/unit_tests $(BUILD)/lib_tests $(BUILD)/header_alone $(BUILD)/nl_check $(BUILD)/mknetkit $(BUILD)/relay_check $(TOOLS) $(TEST_BPF)

deps:
	@./scripts/deps.sh $(DEB_PACKAGES)

$(BUILD) $(BUILD)/obj $(BUILD)/lib:
	$(Q)mkdir -p $@

$(BUILD)/vmlinux.h: | $(BUILD)
	$(call msg,GEN,$@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/%.bpf.o: bpf/%.bpf.c $(BUILD)/vmlinux.h $(wildcard include/*.h) $(wildcard bpf/lib/*.h) | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.bpf.o: tests/bpf/%.bpf.c $(BUILD)/vmlinux.h | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $*_bpf > $@

HEADERS   := $(wildcard include/*.h include/podinject/*.h lib/*.h)

$(BUILD)/lib/%.o: lib/%.c $(SKELS) $(HEADERS) | $(BUILD)/lib
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $(LIB_CFLAGS) -c $< -o $@

$(PUBLIC_HDR): include/podinject/podinject.h
	$(Q)mkdir -p $(@D) && cp $< $@

$(BUILD)/obj/%.o: src/%.c $(PUBLIC_HDR) $(wildcard src/*.h) | $(BUILD)/obj
	$(call msg,CC,$@)
	$(Q)$(CC) $(PUBLIC_CFLAGS) -c $< -o $@

# One relocatable object whose only global symbols are pi_*: a program
# that links the library meets none of its internal names.
$(LIBPI): $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)$(LD) -r -o $(BUILD)/libpodinject.o $^
	$(Q)objcopy --wildcard --keep-global-symbol='pi_*' $(BUILD)/libpodinject.o
	$(Q)rm -f $@ && $(AR) rcs $@ $(BUILD)/libpodinject.o

$(BUILD)/podinject: $(CLI_OBJS) $(LIBPI)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS) -ldl

# `metrics --listen` loads libmicrohttpd by its soname (src/metrics.c): not
# linked, so that no other command loads it and the TLS library under it.
MHD_SONAME := $(shell objdump -p "$$($(CC) -print-file-name=libmicrohttpd.so)" 2>/dev/null | awk '$$1 == "SONAME" { print $$2 }')
$(BUILD)/obj/metrics.o: PUBLIC_CFLAGS += $(if $(MHD_SONAME),-DMHD_SONAME='"$(MHD_SONAME)"')

# The version `podinject metrics` reports (podinject_build_info) and
# apply's record of the last apply is made by: git's
# description of the tree, the file rewritten only when it changes.
PI_VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(BUILD)/version.h: FORCE | $(BUILD)
	$(Q)echo '#define PODINJECT_VERSION "$(PI_VERSION)"' >$@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(BUILD)/obj/metrics.o: $(BUILD)/version.h
# apply's record of the last apply is good for one build only
$(BUILD)/lib/apply.o: $(BUILD)/version.h
FORCE:

# TLS origination (--tls-dir): OpenSSL 3
$(BUILD)/podinject-proxy: proxy/podinject-proxy.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $< -o $@ -lssl -lcrypto

# The CNI plugin: a front-end on the library, like the CLI (cni/cni.h
# names its parts; tests/fuzz/fuzz.mk links some of them into fuzz_cni).
# Its RPATH finds the libraries the DaemonSet installs beside it on a host
# (deploy/kubernetes/install.sh).
# The runtime starts the plugin once per pod and command, and on this kind
# of machine most of what a `"datapath": "none"` ADD costs is the process
# itself: its libraries are linked in (Debian's -dev packages have their
# archives), which spares the dynamic loader five of its six libraries
# (libmnl has no archive): about 0.8 ms of CPU less per ADD or DEL here
# (docs/bench.md, "CNI setup time").
CNI_SRCS  := $(wildcard cni/*.c)
CNI_LDLIBS := -Wl,-Bstatic -lbpf -lelf -lz -ljansson -lyaml -lnettle -Wl,-Bdynamic -lmnl -pthread
$(BUILD)/podinject-cni: $(CNI_SRCS) cni/cni.h $(HEADERS) $(LIBPI) | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(CNI_SRCS) $(LIBPI) -o $@ $(CNI_LDLIBS) \
		-Wl,-rpath,'$$ORIGIN/podinject.lib'

# The OCI image (buildah, offline): build/podinject-image.tar
image: all
	@./scripts/build-image.sh $(BUILD)/podinject-image.tar

$(BUILD)/unit_tests: $(UNIT_SRCS) src/prom.c src/prom.h $(LIB_OBJS) $(SKELS) $(wildcard tests/unit/*.h) $(HEADERS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(LIB_CFLAGS) $(UNIT_CFLAGS) -Wno-missing-field-initializers -Itests/unit $(UNIT_SRCS) src/prom.c $(LIB_OBJS) -o $@ $(LDLIBS)

# The API's own tests link the library as any other program would.
$(BUILD)/lib_tests: $(wildcard tests/lib/*.c) $(PUBLIC_HDR) $(LIBPI)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(PUBLIC_CFLAGS) $(filter %.c,$^) $(LIBPI) -o $@ $(LDLIBS)

# The public header stands alone (tests/header/alone.c): its copy in
# PUBLIC_INC is the only header of the project the program sees, as under
# an installed libpodinject; it links with the archive. Strict C99, so
# that the header asks nothing of its users' compilers.
$(BUILD)/header_alone: tests/header/alone.c $(PUBLIC_HDR) $(LIBPI) | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) -std=c99 -Wall -Wextra -Wpedantic -Werror $(filter -fsanitize=% -fno-sanitize-recover=% -fno-omit-frame-pointer,$(CFLAGS)) \
		-I$(PUBLIC_INC) $< $(LIBPI) -o $@ $(LDLIBS)

# lib/nl.c end to end against the running kernel (tests/run.sh runs it)
$(BUILD)/nl_check: tests/nlcheck/nl_check.c lib/nl.c lib/nl.h | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(LIB_CFLAGS) tests/nlcheck/nl_check.c lib/nl.c -o $@ -lmnl

# podinject-proxy's TLS relay, its source compiled in (tests/run.sh runs it)
$(BUILD)/relay_check: tests/relay/relay_check.c proxy/podinject-proxy.c | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $< -o $@ -lssl -lcrypto

$(BUILD)/mknetkit: tests/nlcheck/mknetkit.c lib/nl.c lib/nl.h | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(CFLAGS)) $(LIB_CFLAGS) tests/nlcheck/mknetkit.c lib/nl.c -o $@ -lmnl

# Test tools stand in for other programs: no sanitizers there.
$(BUILD)/%: tests/tools/%.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(CFLAGS)) $< -o $@ $(LDLIBS)

# tcp-connect --sha256 takes libcrypto's digest
$(BUILD)/pinet: LDLIBS += -lcrypto
$(BUILD)/pinet: tests/tools/conn_loop.h

# the TLS test server (t_mtls)
$(BUILD)/tlsd: tests/tools/tlsd.c tests/tools/tls_tool.h | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(CFLAGS)) $< -o $@ -lssl -lcrypto

# the TLS test client (podinject-proxy --inbound)
$(BUILD)/tlsc: tests/tools/tlsc.c tests/tools/tls_tool.h tests/tools/conn_loop.h | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) $(filter-out -fsanitize=% -fno-sanitize-recover=%,$(CFLAGS)) $< -o $@ -lssl -lcrypto

test: all
	@./tests/run.sh

demo: all
	@./scripts/demo.sh

bench: all
	@./bench/run.sh

# The injection suite in the kernel lab's guest (ours, debian-6.12).
bench-lab: all
	@./lab/bench.sh $(KERNELS)

lab: all
	@./lab/run.sh $(KERNELS)

clean:
	rm -rf $(BUILD)

# The fuzzers: tests/fuzz/fuzz.mk (make fuzz, FUZZ_TIME=seconds each)
include tests/fuzz/fuzz.mk
