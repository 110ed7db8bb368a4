"""Who vouches for a result: the user's ed25519 key, the keys they trust, signatures on what travels.
(What arrives signed by a key not trusted is kept apart by the store: store/untrusted.py.)"""
