# controlplane.mk: builds the etcd and kube-apiserver binaries that
# internal/testing/controlplane runs in tests and the demo. Included from the
# Makefile; paths are relative to the directory holding this file.
#
#   make controlplane   build .cache/bin/etcd and .cache/bin/kube-apiserver
#                       when missing or older than tools/*/go.mod or main.go
#
# Both come from the Go module proxy through the nested modules tools/etcd and
# tools/apiserver, so their dependencies stay out of the library's go.mod.

CONTROLPLANE_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
CONTROLPLANE_BIN  := $(CONTROLPLANE_ROOT)/.cache/bin
ETCD_VERSION      := v3.6.16
KUBE_VERSION      := v1.37.2
KUBE_LDFLAGS      := -X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37

.PHONY: controlplane
controlplane: $(CONTROLPLANE_BIN)/etcd $(CONTROLPLANE_BIN)/kube-apiserver

$(CONTROLPLANE_BIN)/etcd: $(CONTROLPLANE_ROOT)/tools/etcd/go.mod $(CONTROLPLANE_ROOT)/tools/etcd/main.go
	@mkdir -p $(CONTROLPLANE_BIN)
	@echo "building etcd $(ETCD_VERSION) from the Go module proxy (first build takes ~1 minute; later builds are cached)"
	cd $(CONTROLPLANE_ROOT)/tools/etcd && go build -o $@ .
	@touch $@

$(CONTROLPLANE_BIN)/kube-apiserver: $(CONTROLPLANE_ROOT)/tools/apiserver/go.mod $(CONTROLPLANE_ROOT)/tools/apiserver/main.go
	@mkdir -p $(CONTROLPLANE_BIN)
	@echo "building kube-apiserver $(KUBE_VERSION) from the Go module proxy (first build takes ~11 minutes on 2 cores; later builds are cached)"
	cd $(CONTROLPLANE_ROOT)/tools/apiserver && go build -ldflags "$(KUBE_LDFLAGS)" -o $@ .
	@touch $@
