"""Parts of the API shared by every framework binding (today: torch)."""
