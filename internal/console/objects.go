package console

// Durable objects: classes, objects, storage, alarms and the audit log. (not built yet)

func (c *Console) registerObjects() {}
