"""Tests of experiments.benchmarks.sweep: its meter of compile time."""


def test_compile_seconds_counts_making_programs_not_running_them():
    import jax
    import jax.numpy as jnp

    from experiments.benchmarks.sweep import CompileSeconds

    def program(x):
        return jnp.cumsum(jnp.sin(x) * 3.0)

    x = jnp.ones(1000)
    with CompileSeconds() as first:
        jax.block_until_ready(jax.jit(program)(x))
    assert first.seconds > 0
    compiled = jax.jit(program).lower(x).compile()
    with CompileSeconds() as outer:
        with CompileSeconds() as inner:
            for _ in range(50):
                jax.block_until_ready(compiled(x))  # runs only: nothing to make
        assert inner.seconds == 0.0
        jax.block_until_ready(jax.jit(lambda x: program(x) + 1.0)(x))
    assert outer.seconds > 0 and inner.seconds == 0.0
