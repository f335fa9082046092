"""What is kept of an attempt for tuning: timing captures and recordings (no content)."""
