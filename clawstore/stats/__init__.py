"""Statistics for conclusions you can defend: intervals on means, paired comparisons, judge reliability."""
