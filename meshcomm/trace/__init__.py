"""Looking back at what ranks did: Chrome trace event files written under MESHCOMM_TRACE, merged per job,
and the flight recorder of each rank's recent collectives, dumped when something goes wrong."""
