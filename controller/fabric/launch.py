"""The os-ken process of a run: `python -m controller.fabric.launch PORT APP [APP...]`.

os-ken's apps run on eventlet green threads, which patch the standard library: they live in a process of
their own, never inside cclab's.  The OpenFlow listener is on 127.0.0.1 only.  os-ken 4 ships no
`osken-manager`; this is the same start-up in a few lines, for the Debian and the PyPI releases alike.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m controller.fabric.launch PORT APP [APP...]", file=sys.stderr)
        return 2
    port, apps = argv[0], argv[1:]
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from os_ken.lib import hub

    hub.patch(thread=False)
    from os_ken import cfg
    from os_ken.base.app_manager import AppManager

    cfg.CONF(args=["--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", port], project="os_ken")
    AppManager.run_apps(apps)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
