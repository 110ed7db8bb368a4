"""Spending: estimate what a build would cost (`claw plan`) before it sends anything; what a killed build spent."""
