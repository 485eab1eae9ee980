-- Issue 15: a class's isolation ('' or 'object': one sandbox per object;
-- 'class': the tenant's objects of the class share sandboxes) and, in class
-- mode, how many objects one shared sandbox serves (0 = the default).
ALTER TABLE object_classes ADD COLUMN isolation TEXT NOT NULL DEFAULT '';
ALTER TABLE object_classes ADD COLUMN objects_per_sandbox INTEGER NOT NULL DEFAULT 0;
