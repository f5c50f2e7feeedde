"""GraphQL documents the Dagster UI sends, shared by the tests that drive Dagster as the UI does."""

LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId status } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
    ... on InvalidSubsetError { message }
  }
}"""
RUN = """query Run($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status } } }"""
