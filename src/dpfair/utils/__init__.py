"""Leaf utilities that import nothing else of dpfair: argument checks (:mod:`~dpfair.utils.validation`), progress
bars (:mod:`~dpfair.utils.progress`), the cache folder (:mod:`~dpfair.utils.cache_folder`), the one door to upstream
internals (:mod:`~dpfair.utils.upstream`), the capabilities estimators declare (:mod:`~dpfair.utils.capabilities`),
the vocabulary of their declared parameter constraints (:mod:`~dpfair.utils.constraints`), a package's names
imported on first use (:mod:`~dpfair.utils.lazy_exports`), files written as one unit (:mod:`~dpfair.utils.files`)
and the membership audit's attack names (:mod:`~dpfair.utils.attacks`)."""
