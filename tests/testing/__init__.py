"""Tests of ae.testing: explored schedules, replay."""
