"""regulator: the regulator's read-only HTTPS API over the vault's archive, in its own process
(``coffre regulator-api``), so that no download or proof ever waits on, or stalls, recording."""
