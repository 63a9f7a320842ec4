"""Sources of a pair's events: the session, live, replayed, followed and saved sides."""
