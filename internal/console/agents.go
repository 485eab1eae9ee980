package console

// Agents and environments: versions, configuration, the sessions that use them. (not built yet)

func (c *Console) registerAgents() {}
