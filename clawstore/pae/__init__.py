"""Reading the reference system's (pae) workspaces: `claw import-pae`."""
