# SPDX-License-Identifier: GPL-2.0
# podinject build. `make` builds everything into build/; nothing generated is
# committed. V=1 shows the full commands.

BUILD     ?= build
CC        ?= gcc
CLANG     ?= clang
BPFTOOL   ?= bpftool
ARCH      := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

CFLAGS    ?= -O2 -g
CFLAGS    += -Wall -Wextra -Werror -Wno-unused-parameter -Wno-format-truncation -Iinclude -Isrc -I$(BUILD) -D_GNU_SOURCE
LDLIBS    := -lbpf -lelf -lz -lmnl
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
	      -Iinclude -Ibpf -I$(BUILD)

# Debian packages the build, the tests and the demo need.
DEB_PACKAGES := make gcc clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev \
	libmnl-dev iproute2 iputils-ping iperf3 jq procps ethtool \
	libjansson-dev containernetworking-plugins podman runc busybox-static \
	catatonit buildah

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

LIB_SRCS  := src/nl.c src/attach.c src/state.c src/util.c src/json.c src/probe_features.c
CLI_SRCS  := src/main.c src/node.c src/pod.c src/policy.c src/features.c src/inject.c src/proxy.c src/probe.c src/xdp.c
LIB_OBJS  := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
CLI_OBJS  := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(CLI_SRCS))

UNIT_SRCS := $(wildcard tests/unit/*.c)
TOOLS     := $(patsubst tests/tools/%.c,$(BUILD)/%,$(wildcard tests/tools/*.c))

.DELETE_ON_ERROR:
.SECONDARY:
.PHONY: all deps test demo bench lab clean image

TEST_BPF  := $(patsubst tests/bpf/%.bpf.c,$(BUILD)/%.bpf.o,$(wildcard tests/bpf/*.bpf.c))

all: $(BUILD)/podinject $(BUILD)/podinject-proxy $(BUILD)/podinject-cni $(BUILD)/unit_tests $(TOOLS) $(TEST_BPF)

deps:
	@./scripts/deps.sh $(DEB_PACKAGES)

$(BUILD) $(BUILD)/obj:
	$(Q)mkdir -p $@

$(BUILD)/vmlinux.h: | $(BUILD)
	$(call msg,GEN,$@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/%.bpf.o: bpf/%.bpf.c $(BUILD)/vmlinux.h include/podinject_abi.h $(wildcard bpf/lib/*.h) | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.bpf.o: tests/bpf/%.bpf.c $(BUILD)/vmlinux.h | $(BUILD)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $*_bpf > $@

$(BUILD)/obj/%.o: src/%.c $(SKELS) $(wildcard src/*.h) include/podinject_abi.h | $(BUILD)/obj
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/podinject: $(CLI_OBJS) $(LIB_OBJS)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/podinject-proxy: proxy/podinject-proxy.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $< -o $@

# The CNI plugin, on the library (CNI_PI_LIB).
CNI_SRCS   := $(wildcard cni/*.c)
CNI_PI_LIB ?= $(BUILD)/libpodinject.a
$(BUILD)/podinject-cni: $(CNI_SRCS) cni/cni.h include/podinject/podinject.h $(CNI_PI_LIB) | $(BUILD)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(CNI_SRCS) $(CNI_PI_LIB) -o $@ $(LDLIBS) -ljansson \
		-Wl,-rpath,'$$ORIGIN/podinject.lib'

# The OCI image (buildah, offline): build/podinject-image.tar
image: all
	@./scripts/build-image.sh $(BUILD)/podinject-image.tar

$(BUILD)/unit_tests: $(UNIT_SRCS) $(LIB_OBJS) $(SKELS) $(wildcard tests/unit/*.h)
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -Wno-missing-field-initializers -Itests/unit $(UNIT_SRCS) $(LIB_OBJS) -o $@ $(LDLIBS)

$(BUILD)/%: tests/tools/%.c | $(BUILD)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

test: all
	@./tests/run.sh

demo: all
	@./scripts/demo.sh

bench: all
	@./bench/run.sh

lab: all
	@./lab/run.sh $(KERNELS)

clean:
	rm -rf $(BUILD)
