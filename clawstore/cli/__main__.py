from clawstore.cli import entry

entry()
