package console

// Tasks and the monitor: each task's monitor state and why, and transcripts. (not built yet)

func (c *Console) registerTasks() {}
