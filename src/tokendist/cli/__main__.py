from ._app import console

console()
