"""The machine claw runs on: files made durable, scratch directories, confinement, what child processes
print, how the process ends, and the settings and limits read from the environment."""
