# SPDX-License-Identifier: GPL-2.0
# The fuzzers (tests/fuzz/): clang's libFuzzer with ASan and UBSan, built
# into a folder of their own. `make fuzz` runs each for FUZZ_TIME seconds
# over its corpus in tests/fuzz/corpus/NAME/ (new inputs go to
# FUZZ_BUILD/corpus/NAME/, not into the repository); FUZZERS=a,b picks some.
FUZZ_BUILD  ?= build-fuzz
FUZZ_CC     ?= clang-14
FUZZ_TIME   ?= 60
FUZZ_CFLAGS := -O1 -g -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -fno-omit-frame-pointer \
	-Wall -Wextra -Werror -Wno-unused-parameter -Wno-unknown-warning-option \
	-Wno-missing-field-initializers -Iinclude -Ilib -D_GNU_SOURCE \
	-DPODINJECT_FUZZ
FUZZ_NAMES  := parse cni proxy bpf
FUZZ_BINS   := $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_NAMES))

.PHONY: fuzz fuzz-build

fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_TIME=$(FUZZ_TIME) ./tests/fuzz/run.sh $(FUZZERS)

$(FUZZ_BUILD):
	$(Q)mkdir -p $@

# The public parsers (lib/parse.c) and the CLI's rule and proxy specs
# (src/policy.c, src/proxy.c) and injection specs (src/inject.c), the
# node calls stood in for by the fuzzer.
FUZZ_PARSE_SRCS := lib/parse.c src/policy.c src/proxy.c src/inject.c src/opts.c src/util.c src/json.c
$(FUZZ_BUILD)/fuzz_parse: tests/fuzz/fuzz_parse.c $(FUZZ_PARSE_SRCS) $(HEADERS) $(wildcard src/*.h) | $(FUZZ_BUILD)
	$(call msg,FUZZ,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -Isrc tests/fuzz/fuzz_parse.c $(FUZZ_PARSE_SRCS) -o $@

# The CNI plugin's config and environment parsing, result and error
# output, and VERSION: the plugin's parts for them, linked with the library
# as the plugin is; no command that touches a node, device or IPAM plugin.
FUZZ_CNI_SRCS := cni/conf.c cni/env.c cni/result.c cni/log.c cni/cmd_version.c
$(FUZZ_BUILD)/fuzz_cni: tests/fuzz/fuzz_cni.c cni/cni.h $(FUZZ_CNI_SRCS) $(LIBPI) | $(FUZZ_BUILD)
	$(call msg,FUZZ,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -Icni tests/fuzz/fuzz_cni.c $(FUZZ_CNI_SRCS) \
		$(LIBPI) -o $@ -ljansson -lnettle $(LDLIBS)

# The proxy's UDP path, with a sk_lookup program standing in for the
# datapath's capture (tests/fuzz/steer.bpf.c).
$(FUZZ_BUILD)/steer.bpf.o: tests/fuzz/steer.bpf.c $(BUILD)/vmlinux.h | $(FUZZ_BUILD)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(FUZZ_BUILD)/steer.skel.h: $(FUZZ_BUILD)/steer.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name steer_bpf > $@

$(FUZZ_BUILD)/fuzz_proxy: tests/fuzz/fuzz_proxy.c proxy/podinject-proxy.c $(FUZZ_BUILD)/steer.skel.h | $(FUZZ_BUILD)
	$(call msg,FUZZ,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -I$(FUZZ_BUILD) tests/fuzz/fuzz_proxy.c -o $@ -lbpf -lelf -lz -lssl -lcrypto

# The real node programs, through the skeleton of the main build.
$(FUZZ_BUILD)/fuzz_bpf: tests/fuzz/fuzz_bpf.c tests/fuzz/bpf_ref.h tests/unit/fixture.c lib/nl.c lib/cls.c $(BUILD)/node.skel.h $(HEADERS) | $(FUZZ_BUILD)
	$(call msg,FUZZ,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fno-sanitize=alignment -I$(BUILD) -Itests/unit \
		tests/fuzz/fuzz_bpf.c tests/unit/fixture.c lib/nl.c lib/cls.c -o $@ -lbpf -lelf -lz -lmnl

# make test runs them briefly (tests/integration/t_fuzz.sh)
test: fuzz-build

clean: fuzz-clean
.PHONY: fuzz-clean
fuzz-clean:
	rm -rf $(FUZZ_BUILD)
