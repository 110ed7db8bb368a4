"""The front every command calls: a workspace's store and campaign, each opened once (see front.py)."""
