"""Services on the store's core: gc, fsck, archives, pack transfer, migration and statistics."""
