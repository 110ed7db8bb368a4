"""Values every layer handles: canonical JSON, JSON from outside, the bounds on numbers from outside,
and what a cost is known to be."""
