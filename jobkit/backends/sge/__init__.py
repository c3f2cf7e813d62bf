"""Son of Grid Engine / Univa-style Grid Engine: qsub -terse, qstat -xml, qacct -j, qdel."""
