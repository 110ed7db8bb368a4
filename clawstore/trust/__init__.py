"""Who vouches for a result: the user's ed25519 key, the keys they trust, signatures on what travels."""
