# The Vagrant box for libvirt (vm/box/build-box.sh): Debian with cclab's
# provisioning done and a wheelhouse of its Python packages, so that `vagrant
# up` and `make demo` in it need no network.  Included by vm/vm.mk.
#
#   make box         build the box unless cached (/var/cache/cclab/box/<suite>-<inputs' hash>/cclab.box)
#   make box-test    bring it up with vagrant-libvirt and run the demo in it, then interrupt a bring-up
#                    (tests/test_vagrant.py)
#   make box-clean   remove the boxes and their caches
#
# Use it: vagrant box add --name cclab "$(vm/box/build-box.sh --path)"
#         CCLAB_BOX=cclab vagrant up --provider=libvirt

BOX_CACHE ?= /var/cache/cclab/box

.PHONY: box box-tools box-test box-clean

box-tools:
	$(Q)vm/provision.sh --vagrant-host

box: box-tools
	$(Q)CCLAB_BOX_CACHE=$(BOX_CACHE) vm/box/build-box.sh

box-test: box venv
	$(Q)CCLAB_BOX_CACHE=$(BOX_CACHE) $(PY) -m pytest -p no:cacheprovider -v -rA tests/test_vagrant.py

box-clean:
	rm -rf $(BOX_CACHE)
