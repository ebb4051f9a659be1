"""What bootstrap decides for a host from its facts alone: the steps and why, refusals (nothing
done) and what is left to the admin, with the exact fix for that OS."""
from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings, strategies as st

from launcher.bootstrap.decide import decide
from launcher.bootstrap.host_plan import ORDER, Wants
from launcher.bootstrap.facts import Facts, Gpu, LockHolder, Package

BARE = Facts(os_id="debian", os_version="12", os_codename="bookworm", os_name="Debian GNU/Linux 12 (bookworm)",
             arch="amd64", user="admin", uid=1000, home="/home/admin", groups=("admin",), groups_db=("admin",),
             sudo="ok", packages={"ca-certificates": Package("ca-certificates", "1", "ii ")},
             free_kb={"docker": 40 << 20, "apt": 40 << 20, "usr": 40 << 20, "home": 40 << 20},
             folders={"workdir": "absent", "data_dir": "none"}, mirror="http://deb.debian.org/debian", complete=True)
WANTS = Wants(folders=(("workdir", "/opt/tfcompose"),))


def ready(f: Facts = BARE, **more) -> Facts:
    """The host as bootstrap leaves it (Debian's engine, compose v2, the user in docker, the workdir)."""
    pkgs = {**f.packages, "docker.io": Package("docker.io", "20.10.24", "ii "),
            "docker-compose": Package("docker-compose", "2.26.1-4", "ii ")}
    return replace(f, packages=pkgs, dockerd=True, docker_cli=True, docker_user=True, engine_version="20.10.24",
                   compose="2.26.1-4", docker_enabled="enabled", docker_active="active", groups=(*f.groups, "docker"),
                   groups_db=(*f.groups_db, "docker"), folders={"workdir": "writable", "data_dir": "none"}, **more)


def test_a_bare_debian_12_gets_debians_engine_and_the_next_releases_compose():
    plan = decide("h0", BARE, WANTS)
    assert plan.kinds() == ["install", "start", "group", "folders"] and plan.refused is None and not plan.blockers
    assert plan.packages == (("docker.io", "archive"), ("docker-compose", "next-release"))
    assert "from Debian trixie: Debian 12 packages none" in plan.steps[0].what
    assert plan.steps[2].what == "add admin to the docker group" and plan.steps[3].paths == ("/opt/tfcompose",)


def test_ubuntu_gets_its_own_compose_v2_package():
    for version, codename in (("22.04", "jammy"), ("24.04", "noble")):
        plan = decide("h0", replace(BARE, os_id="ubuntu", os_version=version, os_codename=codename), WANTS)
        assert plan.packages == (("docker.io", "archive"), ("docker-compose-v2", "archive")), version


def test_dockers_repository_is_added_online_only_and_only_where_the_host_lacks_it():
    docker = replace(WANTS, docker="docker")
    plan = decide("h0", BARE, docker)
    assert plan.kinds()[:2] == ["repository", "install"] and plan.steps[0].repositories == ("docker",)
    assert [n for n, _ in plan.packages] == ["docker-ce", "docker-ce-cli", "containerd.io", "docker-buildx-plugin",
                                             "docker-compose-plugin"]
    assert "repository" not in decide("h0", BARE, replace(docker, offline=True)).kinds()
    by_hand = replace(BARE, repositories=("https://download.docker.com/linux/debian",))
    assert "repository" not in decide("h0", by_hand, docker).kinds()


def test_a_ready_host_has_nothing_to_do_and_needs_no_sudo():
    for sudo in ("ok", "password", "missing", "denied"):
        plan = decide("h0", ready(sudo=sudo), WANTS)
        assert plan.nothing_to_do and plan.ready and plan.refused is None, sudo


def test_an_engine_already_there_is_kept_and_only_compose_added():
    debian_engine = replace(ready(), compose="", packages={"docker.io": Package("docker.io", "20.10", "ii ")})
    assert decide("h0", debian_engine, WANTS).packages == (("docker-compose", "next-release"),)
    docker_ce = replace(ready(), compose="", packages={"docker-ce": Package("docker-ce", "27.0", "ii ")})
    assert decide("h0", docker_ce, replace(WANTS, docker="distro")).packages == (("docker-compose-plugin", "docker"),)
    snap = replace(ready(), compose="", packages={})
    plan = decide("h0", snap, WANTS)
    assert plan.packages == () and "compose plugin for it yourself" in plan.blockers[0]


def test_unsupported_systems_are_refused_naming_what_they_run():
    rocky = decide("h2", replace(BARE, os_id="rocky", os_version="9.3", os_name="Rocky Linux 9.3 (Blue Onyx)"), WANTS)
    assert rocky.refused == ("runs Rocky Linux 9.3 (Blue Onyx) (rocky 9.3); tfcompose bootstrap supports Debian 12 "
                             "and Ubuntu 22.04 and 24.04") and rocky.steps == ()
    assert "Debian GNU/Linux 11" in decide("h2", replace(BARE, os_version="11", os_name="Debian GNU/Linux 11"), WANTS).refused
    assert "is i386" in decide("h2", replace(BARE, arch="i386"), WANTS).refused
    assert "cut short" in decide("h2", replace(BARE, complete=False), WANTS).refused


def test_sudo_wanting_a_password_is_refused_with_both_fixes_unless_the_password_was_given():
    plan = decide("h1", replace(BARE, sudo="password"), WANTS)
    assert plan.steps == () and "sudo asks admin for a password" in plan.refused
    assert "`admin ALL=(ALL) NOPASSWD: ALL`" in plan.refused and "--ask-become-pass" in plan.refused
    assert decide("h1", replace(BARE, sudo="password"), replace(WANTS, become_pass=True)).steps
    denied = decide("h1", replace(BARE, sudo="denied", sudo_said="admin is not in the sudoers file."), WANTS)
    assert "admin may not use sudo (admin is not in the sudoers file.)" in denied.refused
    assert "sudo is not installed" in decide("h1", replace(BARE, sudo="missing"), WANTS).refused


def test_an_interrupted_install_of_ours_is_finished_and_anyone_elses_refused():
    ours = decide("h1", replace(ready(), dpkg_broken=(("docker.io", "iF"), ("containerd", "iU"))), WANTS)
    assert ours.kinds() == ["finish-dpkg"] and "docker.io (half-configured), containerd (unpacked)" in ours.steps[0].why
    theirs = decide("h1", replace(BARE, dpkg_broken=(("postgresql-15", "iF"),)), WANTS)
    assert theirs.steps == () and "postgresql-15 (half-configured)" in theirs.refused
    assert "`sudo dpkg --configure -a`" in theirs.refused and "nothing was changed" in theirs.refused


def test_no_room_to_install_is_refused_and_a_small_docker_root_noted():
    full = decide("h1", replace(BARE, free_kb={**BARE.free_kb, "usr": 200 * 1024}), WANTS)
    assert full.steps == () and full.refused.startswith("only 200 MB free at /usr")
    apt = decide("h1", replace(BARE, free_kb={**BARE.free_kb, "apt": 10 * 1024}), WANTS)
    assert "/var/cache/apt/archives" in apt.refused
    assert decide("h1", replace(BARE, free_kb={**BARE.free_kb, "apt": 10 * 1024}), replace(WANTS, offline=True)).refused is None
    assert decide("h1", replace(BARE, free_kb={}), WANTS).refused is None            # unknown is not "full"
    small = decide("h1", replace(BARE, free_kb={**BARE.free_kb, "docker": 3 << 20}), WANTS)
    assert small.steps and any("Docker's root" in n for n in small.notes)


def test_a_held_apt_lock_is_named_in_the_plan():
    holder = LockHolder(812, "unattended-upgr", "/var/lib/dpkg/lock-frontend")
    assert decide("h1", replace(BARE, apt_locks=(holder,)), WANTS).waits_for == (
        "unattended-upgr (pid 812) holds /var/lib/dpkg/lock-frontend",)
    assert decide("h1", replace(ready(), apt_locks=(holder,)), WANTS).waits_for == ()


def test_folders_absent_are_made_and_unwritable_ones_left_to_the_admin():
    wants = Wants(folders=(("workdir", "/opt/tfcompose"), ("data_dir", "/srv/oasis")))
    plan = decide("h1", replace(ready(), folders={"workdir": "not-writable", "data_dir": "absent"}), wants)
    assert plan.kinds() == ["folders"] and plan.steps[0].paths == ("/srv/oasis",)
    assert plan.blockers == ("workdir /opt/tfcompose exists but admin cannot write it: `sudo chown admin "
                             "/opt/tfcompose` on the host, or choose another workdir",)


def test_an_installation_still_running_is_followed_first():
    assert decide("h1", replace(BARE, running_pid=4242), WANTS).kinds() == ["follow"]


GPU = replace(ready(), gpu_pci=2, nvidia_smi="ok", nvidia_module=True,
              gpus=(Gpu("535.129.03", "NVIDIA A100"), Gpu("535.129.03", "NVIDIA A100")))
ALL = replace(WANTS, gpus="all")


def test_a_gpu_host_with_a_working_driver_gets_the_toolkit_the_runtime_and_a_check():
    plan = decide("g", GPU, ALL)
    assert plan.kinds() == ["repository", "install", "nvidia-runtime", "gpu-check"]
    assert plan.packages == (("nvidia-container-toolkit", "nvidia"),) and plan.steps[0].repositories == ("nvidia",)
    assert decide("g", GPU, replace(ALL, toolkit_in_debs=True)).packages == (("nvidia-container-toolkit", "debs"),)
    done = replace(GPU, nvidia_ctk="NVIDIA Container Toolkit CLI version 1.17.8", runtimes=("nvidia", "runc"))
    assert decide("g", done, ALL).ready
    assert decide("g", done, replace(ALL, gpus=[0, 1, 2])).blockers == (
        "the inventory asks for 3 GPU(s) here but nvidia-smi lists 2",)


def test_gpus_not_asked_for_skip_the_nvidia_part_and_asked_for_without_a_gpu_say_so():
    assert decide("g", GPU, WANTS).ready and "not asked for" in decide("g", GPU, WANTS).notes[0]
    plan = decide("c", ready(), ALL)
    assert plan.steps == () and "set `gpus: 0` for this host" in plan.blockers[0]


def test_the_driver_is_never_installed_its_problem_is_said_with_the_fix_for_that_os():
    missing = replace(ready(), gpu_pci=1, nvidia_smi="missing")
    debian = decide("g", missing, ALL)
    assert debian.steps == () and "tfcompose never installs one" in debian.blockers[0]
    assert "sudo apt install linux-headers-amd64 nvidia-driver firmware-misc-nonfree" in debian.blockers[0]
    ubuntu = decide("g", replace(missing, os_id="ubuntu", os_version="24.04", os_codename="noble"), ALL)
    assert "sudo ubuntu-drivers install" in ubuntu.blockers[0]
    old = decide("g", replace(GPU, gpus=(Gpu("470.82.01", "Tesla T4"),)), ALL)
    assert old.blockers[0].startswith("the NVIDIA driver 470.82.1 is older than 525.60.13")
    sb = decide("g", replace(missing, nvidia_smi="failed", secure_boot=True, nvidia_module=False,
                             nvidia_said="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"), ALL)
    assert "Secure Boot is on" in sb.blockers[0] and "mokutil --import /var/lib/dkms/mok.pub" in sb.blockers[0]
    reboot = decide("g", replace(missing, nvidia_smi="failed", reboot_required=True, reboot_packages="nvidia-dkms-535"), ALL)
    assert "a reboot is pending (nvidia-dkms-535): reboot the host (`sudo reboot`)" in reboot.blockers[0]
    assert decide("g", replace(GPU, gpus=(Gpu("525.60.13", "A10"),), nvidia_ctk="x", runtimes=("nvidia",)), ALL).ready


# --- properties -----------------------------------------------------------------------------------

def effects(f: Facts, plan) -> Facts:
    """What the plan's steps do to the host (as commands.APPLY does them)."""
    pkgs = dict(f.packages)
    for name, _ in plan.packages:
        pkgs[name] = Package(name, "2.0", "ii ")
    kinds = set(plan.kinds())
    engine = "installed" if any(n in pkgs for n in ("docker.io", "docker-ce")) else ""
    compose = "2.0" if any(n in pkgs for n in ("docker-compose", "docker-compose-v2", "docker-compose-plugin")) else f.compose
    groups = (*f.groups_db, "docker") if "group" in kinds else f.groups_db
    folders = {k: ("writable" if v == "absent" and "folders" in kinds else v) for k, v in f.folders.items()}
    return replace(f, packages=pkgs, dockerd=f.dockerd or bool(engine), engine_version=f.engine_version or ("1" if engine else ""),
                   compose=compose, docker_enabled="enabled" if "start" in kinds else f.docker_enabled,
                   groups=groups, groups_db=groups, folders=folders, dpkg_broken=(), running_pid=None,
                   nvidia_ctk=f.nvidia_ctk or ("1.17" if "nvidia-container-toolkit" in pkgs else ""),
                   runtimes=(*f.runtimes, "nvidia") if "nvidia-runtime" in kinds else f.runtimes)


facts_strategy = st.builds(
    lambda os_pick, sudo, engine, compose, group, folder, gpu, driver, broken, docker_repo: replace(
        BARE, os_id=os_pick[0], os_version=os_pick[1], os_codename=os_pick[2], sudo=sudo,
        packages={**BARE.packages, **({engine: Package(engine, "1", "ii ")} if engine else {})},
        dockerd=bool(engine), engine_version="20.10" if engine else "", compose=compose,
        groups_db=("admin", "docker") if group else ("admin",), folders={"workdir": folder, "data_dir": "none"},
        gpu_pci=gpu, nvidia_smi="ok" if gpu and driver else ("missing" if not gpu else "failed"),
        gpus=tuple(Gpu(driver, "GPU") for _ in range(gpu)) if driver else (),
        dpkg_broken=(("docker.io", "iF"),) if broken else (),
        repositories=("https://download.docker.com/linux/ubuntu",) if docker_repo else ()),
    st.sampled_from([("debian", "12", "bookworm"), ("ubuntu", "22.04", "jammy"), ("ubuntu", "24.04", "noble"),
                     ("fedora", "40", ""), ("debian", "11", "bullseye")]),
    st.sampled_from(["ok", "root", "password", "denied", "missing", "unknown"]),
    st.sampled_from(["", "docker.io", "docker-ce"]), st.sampled_from(["", "2.26.1-4", "v2.29.1", "1.29.2"]),
    st.booleans(), st.sampled_from(["absent", "writable", "not-writable", "unknown"]), st.integers(0, 4),
    st.sampled_from(["", "470.82.01", "535.129.03", "550.54.15"]), st.booleans(), st.booleans())
wants_strategy = st.builds(Wants, gpus=st.sampled_from([0, "all", 2, [0]]), folders=st.just((("workdir", "/opt/t"),)),
                           docker=st.sampled_from(["distro", "docker"]), offline=st.booleans(), become_pass=st.booleans(),
                           toolkit_in_debs=st.booleans())


@settings(max_examples=400, deadline=None)
@given(facts_strategy, wants_strategy)
def test_any_host_gets_a_plan_in_order_and_doing_it_leaves_nothing_to_do(f, w):
    plan = decide("h", f, w)
    assert (plan.refused is None) or plan.steps == ()
    assert [ORDER.index(k) for k in plan.kinds()] == sorted(ORDER.index(k) for k in plan.kinds())
    assert all(origin in ("archive", "next-release", "docker", "nvidia", "debs") for _, origin in plan.packages)
    assert len({n for n, _ in plan.packages}) == len(plan.packages)        # nothing asked twice
    if plan.steps and plan.refused is None:
        again = decide("h", effects(f, plan), w)
        assert again.steps == () and again.refused is None, (plan, again)
        assert set(again.blockers) == set(plan.blockers)
