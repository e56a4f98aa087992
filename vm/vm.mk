# The qemu lab VM (Debian 13's stock kernel 6.12: netem, loadable modules,
# bpf_rdonly_cast), for kernels that lack them.  Included by the top Makefile.
#
#   make vm         build the image unless cached (/var/cache/cclab/vm/<suite>-<inputs' hash>)
#   make vm-test    the VM test tier: our .ko modules (built in the guest), in-tree
#                   baselines, a netem run, coupled mptcpw over two delayed paths
#   make vm-bench   TCP throughput through the VM's emulated bottleneck (KVM, TCG)
#   make vm-clean   remove the images, the .deb cache and the VM logs
#
# Run a command in it: /usr/bin/python3 -m controller.vm run -- uname -r

VM_PY        := $(SYSTEM_PYTHON) -m controller.vm
VM_CACHE     ?= /var/cache/cclab/vm
VM_TEST_ARGS ?=

.PHONY: vm vm-tools vm-test vm-bench vm-clean

vm-tools:
	$(Q)vm/provision.sh --vm-host

vm: vm-tools
	$(Q)CCLAB_VM_CACHE=$(VM_CACHE) $(VM_PY) build

vm-test: vm venv build
	$(Q)CCLAB_VM_CACHE=$(VM_CACHE) $(PY) -m pytest -p no:cacheprovider -v -s -rA tests/test_vm.py \
		tests/test_vm_networks.py tests/test_cc_mptcp.py::test_coupled_mptcpw_with_netem_in_the_lab_vm $(VM_TEST_ARGS)

vm-bench: vm build
	$(Q)CCLAB_VM_CACHE=$(VM_CACHE) $(VM_PY) bench

vm-clean:
	rm -rf $(VM_CACHE) /run/cclab/vm /run/cclab/vm-accel.json

# The Vagrant box: make box, make box-test.
-include vm/box.mk
