"""The dependency graph: node kinds, canonical input documents, keys, planning and explain."""
