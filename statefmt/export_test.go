package statefmt

// ExecutionStepFields exposes to the tests how many fields the encoder's step memo compares.
const ExecutionStepFields = executionStepFields
