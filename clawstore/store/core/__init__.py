"""The store's core: the object codec, packs, the index, group commit, objects, layout and locks."""
