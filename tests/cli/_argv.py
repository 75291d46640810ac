"""What the bad-input tests share: an argument list with one option set, and the one-line refusal."""

from tokendist.cli import main


def with_option(base, option, value):
    """``base`` with ``option`` set to ``value`` (replaced where ``base`` has it, else appended)."""
    argv = list(base)
    if option in argv:
        argv[argv.index(option) + 1] = value
    else:
        argv += [option, value]
    return argv


def refused(argv, capsys, words=None):
    """Run ``argv``: exit code 2 and one ``error:`` line on stderr (containing ``words``); the line."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, (argv, code, err)
    assert err.startswith("error: ") and err.count("\n") == 1, (argv, err)
    if words:
        assert words in err, err
    return err
