package console

// Keys, and tenants for admin keys. (not built yet)

func (c *Console) registerAdmin() {}
