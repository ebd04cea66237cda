package stores

// SchemaFiles lets the tests compare the embedded schema with the platform's migration.
var SchemaFiles = schemaFiles
