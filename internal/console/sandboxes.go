package console

// Sandboxes: state and its history, limits, backups, the workspace's files and an exec box. (not built yet)

func (c *Console) registerSandboxes() {}
